//! The runtime of [Fusion](https://docs.rs/fusion): registry, request pipeline, envelope,
//! errors, state sync and the in-memory tester, on top of [`rmcp`].
//!
//! Users depend on the `fusion` crate, which re-exports this one together with the macros.
//! Everything here works without the macros: `#[model]`, `#[presenter]` and `#[tool]` only
//! generate calls into this crate.
//!
//! The modules follow a call:
//! - what authors declare: [`model`], [`present`], [`spec`] (tools), [`resource`],
//!   [`prompt`] and [`complete`] (completions), [`args`] (their parameters), [`middleware`], [`router`], [`access`], [`guard`];
//! - what a built server is: [`build`] checks and compiles everything once into a
//!   [`server::Server`], whose actions [`action`] describes, exposed flat or grouped;
//! - the request path, in order: [`pipeline`] (resolve, access, arguments, middleware,
//!   guards, handler, present), [`envelope`] (seal), [`observe`] and [`audit`] (report);
//!   a handler runs its synchronous work off the async workers with [`blocking()`];
//!   [`content`] is the shorter path of resource reads, prompts and completions;
//! - on top: the transports in [`serve`] and the in-memory [`testing`] tester;
//! - around it: the capability lockfile, [`lock`], that makes the surface a reviewed artifact.

pub mod access;
pub mod action;
pub mod args;
pub mod audit;
mod blocking;
pub mod build;
mod catalog;
pub mod complete;
pub mod content;
pub mod context;
mod described;
pub mod elicit;
pub mod envelope;
pub mod error;
mod expose;
#[cfg(feature = "gateway")]
pub mod gateway;
pub mod guard;
pub mod guarded;
pub mod hidden;
pub mod key;
pub mod keyed;
pub mod lock;
pub mod logging;
pub mod media;
pub mod middleware;
pub mod model;
pub mod observe;
pub mod pipeline;
pub mod present;
pub mod principal;
pub mod prompt;
pub mod request_state;
pub mod resource;
pub mod router;
mod schema;
mod scope_token;
pub mod scopes;
pub mod serve;
pub mod server;
pub mod spec;
pub mod task;
mod tenancy;
pub mod testing;
pub mod upstream;
pub mod waiting;
pub mod wire;
pub mod xml;

pub use access::AccessPolicy;
pub use action::{ActionInfo, CacheHint, Exposition, Exposure, Surface, Verb};
pub use args::Params;
pub use audit::{AuditEntry, AuditRecord, AuditSink};
pub use blocking::blocking;
pub use build::ServerBuilder;
#[cfg(feature = "http")]
pub use context::HttpRequest;
pub use context::{CallContext, Ext, FromContext, Progress, Provided, ServerParts, State};
pub use elicit::DEFAULT_ASK_TIMEOUT;
pub use error::{BuildError, ErrorCatalog, ToolError, codes, echo};
pub use guard::{
    Concurrency, DEFAULT_SERVER_CONCURRENCY, DEFAULT_TENANT_SHARE_PERCENT, RateLimit,
    Serialization, SerializationLock,
};
pub use guarded::{GuardedInput, InputSurface};
pub use hidden::Hidden;
pub use key::{Glob, ToolKey};
pub use middleware::Middleware;
pub use model::{ArgumentGroup, Create, FieldInfo, Fillable, Filter, Model, ModelFields, Update};
pub use observe::Metrics;
pub use present::{
    Nested, NestedPresenter, Page, Plain, Presentation, Presented, PresentedValue, Presenter,
    PresenterInfo, PresenterOf, Suggestion, ToolOutput, Truncation, UiBlock,
};
pub use principal::Principal;
pub use prompt::{Prompt, PromptInfo, PromptMessages, PromptOutput, PromptSpec};
pub use resource::{Resource, ResourceInfo, ResourceOutput, ResourceSpec};
pub use router::Router;
pub use server::{Server, ToolInfo, ToolResult, UnknownTool};
pub use spec::{Tool, ToolSpec};
pub use task::{MemoryTaskStore, TaskOptions, TaskStore, TaskSupport};
#[cfg(feature = "http-client")]
pub use upstream::HttpUpstream;
pub use upstream::{FromUpstream, HttpRoute, UpstreamRequest};

pub use rmcp;
