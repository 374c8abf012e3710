//! # Fusion
//!
//! Build MCP connectors whose guarantees are proven at compile time.
//!
//! An MCP connector puts a company's data and operations in front of AI agents. Fusion lets you
//! write it as plain Rust structs and `async fn`s annotated with three macros, and generates at
//! compile time what hand-written servers get wrong at run time:
//!
//! - [`#[model]`](macro@model): what each field means, which fields never leave (hidden) and
//!   never enter (guarded), and the input profiles built from the rest;
//! - [`#[presenter]`](macro@presenter): the egress view — only listed fields, never a hidden
//!   one — with rules, an agent limit, suggested next actions and UI blocks;
//! - [`#[tool]`](macro@tool): a verb (`query`, `mutation`, `action`), a name, options and a
//!   compiled dispatch entry.
//!
//! A [`ServerBuilder`] checks everything once and builds an immutable [`Server`]; the
//! [`testing::Tester`] runs it in memory, and [`serve::Mcp`] serves it over stdio or
//! Streamable HTTP with `rmcp`.
//!
//! ```
//! use fusion::testing::Tester;
//! use fusion::{ServerBuilder, State, ToolError, model, presenter, tool};
//!
//! #[model]
//! pub struct Invoice {
//!     #[cast("Invoice id, such as INV-7")]
//!     pub id: String,
//!     #[cast("Total in integer cents")]
//!     pub total_cents: i64,
//!     #[hidden]
//!     pub webhook_secret: fusion::Hidden<String>,
//! }
//!
//! #[presenter(Invoice, fields(id, total_cents), rules = ["Divide cents by 100 for display."])]
//! pub struct InvoiceView;
//!
//! pub struct Db {
//!     totals: Vec<(String, i64)>,
//! }
//!
//! /// Gets an invoice by id.
//! #[tool(query, name = "billing.get_invoice", returns = InvoiceView)]
//! async fn get_invoice(db: State<Db>, id: String) -> Result<Invoice, ToolError> {
//!     let (id, total_cents) = db.totals.iter().find(|(known, _)| *known == id).cloned()
//!         .ok_or_else(|| ToolError::not_found(format!("Invoice {id} does not exist.")))?;
//!     Ok(Invoice { id, total_cents, webhook_secret: "whsec_42".into() })
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let server = ServerBuilder::new("billing", "1.0.0")
//!     .state(Db { totals: vec![("INV-1".into(), 1250)] })
//!     .tool::<get_invoice>()
//!     .build()?;
//! let result = Tester::new(server).call("billing.get_invoice", fusion::serde_json::json!({"id": "INV-1"})).await;
//! assert_eq!(result.data(), &fusion::serde_json::json!({"id": "INV-1", "total_cents": 1250}));
//! assert!(!result.raw_text().contains("whsec_"));
//! assert_eq!(result.rules().last().unwrap(), "Divide cents by 100 for display.");
//! # Ok::<_, fusion::BuildError>(()) }).unwrap();
//! ```
//!
//! ## Dependencies
//!
//! A connector's `Cargo.toml` needs `fusion` and an async runtime, nothing else:
//!
//! ```toml
//! [dependencies]
//! fusion = "0.1"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! serde, serde_json and schemars come with `fusion`, at the versions it uses: write
//! `fusion::serde_json::json!`, derive a connector's own argument and result types with
//! [`#[fusion::data]`](macro@data), and name the protocol's own types through [`protocol`].
//!
//! ## The response envelope
//!
//! Every tool answers in one shape, in `structuredContent`, with what varies per call and no
//! more: `{"ok": true, "data": …, "meta"?: {"action", "cache", "truncated", "invalidates"}}`
//! or `{"ok": false, "error": {"code", "retryable"?, "details"?, "retryAfterMs"?, "errorId"?},
//! "meta"?: …}`, with `isError` set exactly on errors. What the agent reads is said once, in the
//! text blocks: the suggested next calls, and an error's message, recovery and tools to call.
//! `content` carries text blocks for the agent, in order: the data (JSON, or a table for a
//! uniform list), a truncation notice, `<ui_passthrough>` blocks (only for a client that
//! declares [`envelope::UI_EXTENSION`]), `<domain_rules>`, `<action_suggestions>` and
//! `<cache_invalidation/>`; or one `<tool_error>` block. A collection that reaches the agent
//! cut (a [`Page`] of a larger one, the presenter's agent limit, the egress budget) is
//! described once, in `meta.truncated` (`shown`, `total`, `hidden`, `reason`, `offset`,
//! `nextOffset`, `nextCursor`) and in the notice.
//!
//! [`production`] describes middleware, authentication, guards, access, audit and tracing;
//! [`lock`] makes the surface agents see a reviewed artifact, `fusion.lock`, checked in tests
//! and at start-up.
//! `gateway` (feature `gateway`) mounts other MCP servers' tools beside your own.
#![doc(test(attr(deny(warnings))))]

#[doc = include_str!("docs/production.md")]
pub mod production {}

#[doc = include_str!("docs/replicas.md")]
pub mod replicas {}
#[doc = include_str!("docs/resources-prompts.md")]
pub mod resources_prompts {}

pub mod lock {
    // Inside the module, so that the guide's links resolve to its items.
    #![doc = include_str!("docs/lock.md")]
    pub use fusion_runtime::lock::*;
}

#[cfg(feature = "http-client")]
#[doc = include_str!("docs/http.md")]
pub mod http {}

#[doc = include_str!("docs/tool_error.md")]
pub use fusion_macros::ToolError;
#[doc = include_str!("docs/data.md")]
pub use fusion_macros::data;
#[doc = include_str!("docs/model.md")]
pub use fusion_macros::model;
#[doc = include_str!("docs/presenter.md")]
pub use fusion_macros::presenter;
/// Declares a prompt: an `async fn` whose typed parameters are the prompt's arguments and
/// whose result is its messages. See the [resources and prompts guide](crate::resources_prompts).
pub use fusion_macros::prompt;
/// Declares a resource: an `async fn` read by URI (fixed, or a template whose variables are its
/// arguments), whose result goes through a presenter. See the
/// [resources and prompts guide](crate::resources_prompts).
pub use fusion_macros::resource;
#[doc = include_str!("docs/tool.md")]
pub use fusion_macros::tool;

// The facade: an explicit list, so that what a user can name is what is documented here.

/// Synchronous work (a store, a file) off the async workers.
pub use fusion_runtime::blocking;
/// Asking the client during a call, in both protocol eras (SPEC P6): the user, its model, its
/// roots.
pub use fusion_runtime::elicit::{Answer, Elicit, Roots, Sample, Sampled, SamplingRequest};
/// Log messages to the client, at the level it asked for.
pub use fusion_runtime::logging::{Log, LogLevel};
/// Content that is not text: images, sounds, embedded resources, bytes.
pub use fusion_runtime::media::{Blob, Media, WithMedia};
/// Tasks in SQLite, which outlive the process (feature `tasks-sqlite`).
#[cfg(feature = "tasks-sqlite")]
pub use fusion_runtime::task::SqliteTaskStore;
/// Long-running calls as tasks (the MCP tasks extension): `#[tool(task = "optional")]`, and
/// where tasks are kept.
pub use fusion_runtime::task::{
    MemoryTaskStore, StoreFuture, TaskOptions, TaskOwner, TaskRecord, TaskState, TaskStore,
    TaskStoreError, TaskSupport,
};
/// Tools, their calls and their errors (SPEC T1–T5, E1–E2).
pub use fusion_runtime::{
    AccessPolicy, BuildError, CacheHint, CallContext, Concurrency, ErrorCatalog, Ext, FromContext,
    Middleware, Params, Principal, Progress, Provided, RateLimit, Router, Serialization,
    SerializationLock, ServerParts, State, Tool, ToolError, ToolSpec, Verb, codes, echo,
};
/// Building and reading back a server (SPEC T2, T4).
pub use fusion_runtime::{
    ActionInfo, Exposition, Exposure, Glob, Server, ServerBuilder, Surface, ToolInfo, ToolKey,
    ToolResult, UnknownTool,
};
/// Models, hidden values and input profiles (SPEC M1–M4).
pub use fusion_runtime::{
    ArgumentGroup, Create, FieldInfo, Fillable, Filter, GuardedInput, Hidden, InputSurface, Model,
    ModelFields, Update,
};
/// Audit and metrics hooks (SPEC R6, R8).
pub use fusion_runtime::{AuditEntry, AuditRecord, AuditSink, Metrics};
/// Presenters and what they produce (SPEC P1–P5).
pub use fusion_runtime::{
    Nested, NestedPresenter, Page, Plain, Presentation, Presented, PresentedValue, Presenter,
    PresenterInfo, PresenterOf, Suggestion, ToolOutput, Truncation, UiBlock,
};
/// Resources, prompts and completions (SPEC P6).
pub use fusion_runtime::{
    Prompt, PromptInfo, PromptMessages, PromptOutput, PromptSpec, Resource, ResourceInfo,
    ResourceOutput, ResourceSpec, complete,
};

/// The HTTP request a call came in.
#[cfg(feature = "http")]
pub use fusion_runtime::HttpRequest;
#[cfg(feature = "gateway")]
#[doc = include_str!("docs/gateway.md")]
pub mod gateway {
    pub use fusion_runtime::gateway::*;
}
/// Bearer authentication of the HTTP transport.
#[cfg(feature = "http")]
pub use fusion_runtime::serve::auth;

/// Serving a [`Server`] over MCP: stdio, Streamable HTTP, and stopping on a signal.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run(server: fusion::Server) -> Result<(), fusion::serve::ServeError> {
/// use fusion::serve::Mcp;
///
/// // Until the client closes stdin, or SIGINT/SIGTERM (calls in flight finish first).
/// Mcp::new(server).serve_stdio_until_signal().await
/// # }
/// ```
pub mod serve {
    #[cfg(feature = "stderr-log")]
    pub use fusion_runtime::serve::log_to_stderr;
    #[cfg(any(feature = "stdio", feature = "http"))]
    pub use fusion_runtime::serve::shutdown_signal;
    pub use fusion_runtime::serve::{
        BUNDLE_META_KEY, Bundle, CALL_TOOL, Discovery, FIND_TOOLS, Mcp, McpHandler, McpOptions,
        RequestInfo, ServeError, ToolSearch,
    };
    #[cfg(feature = "http")]
    pub use fusion_runtime::serve::{
        BoundedSessions, HttpOptions, InvalidReplicaName, ProtectedResource, ReplicaName,
        SessionsError,
    };
    /// The OAuth 2.1 resource server (feature `oauth`): JWTs checked against the issuer's
    /// keys, opaque tokens through introspection, identity from claims.
    #[cfg(feature = "oauth")]
    pub mod oauth {
        pub use fusion_runtime::serve::oauth::*;
    }
}

/// The scopes a call needs (SPEC A): declared per tool, or derived from the verb.
pub mod scopes {
    pub use fusion_runtime::scopes::*;
}

/// The audit trail (SPEC R6): what a call records, and where records go.
pub mod audit {
    #[cfg(feature = "audit-sqlite")]
    pub use fusion_runtime::audit::SqliteAuditSink;
    pub use fusion_runtime::audit::{
        AuditEntry, AuditError, AuditRecord, AuditSink, KEYED_DIGEST_PREFIX, TracingAuditSink,
        arguments_digest, keyed_arguments_digest,
    };
}

/// Where a guarded name was found in an input, as [`BuildError::guarded_inputs`] reports it,
/// and the schema keyword that states an exception on a struct's field.
pub mod guarded {
    pub use fusion_runtime::guarded::{GuardedInput, InputSurface, NOT_GUARDED};
}

/// Keys for digests that must be no offline oracle: a [`Hidden`] value's
/// [`keyed_digest`](Hidden::keyed_digest), the audit record's digest of hidden arguments.
pub mod keyed {
    pub use fusion_runtime::keyed::{DigestKey, MIN_KEY_LEN};
}

/// Observability (SPEC R8): spans named as the OpenTelemetry semantic conventions for MCP
/// say, and metrics hooks.
pub mod observe {
    pub use fusion_runtime::observe::{
        CallReport, CallStats, LATENCY_BUCKETS_US, Metrics, OPERATION_DURATION, PROMPTS_GET,
        RESOURCES_READ, StatsSnapshot, TOOLS_CALL, TraceContext,
    };
}

/// Middleware: code that runs before a call's guards and handler (SPEC R1).
pub mod middleware {
    pub use fusion_runtime::middleware::{
        ActionRef, FromAsync, FromFn, Middleware, MiddlewareFuture, Provide, from_async, from_fn,
    };
}

/// Asking the client during a call: the error codes of a client that cannot answer, and
/// the types of its answers.
pub mod elicit {
    pub use fusion_runtime::elicit::{
        Answer, ELICITATION_UNSUPPORTED, Elicit, INPUT_REQUIRED, ROOTS_UNSUPPORTED, Root, Roots,
        SAMPLING_UNSUPPORTED, Sample, Sampled, SamplingRequest,
    };
}

/// The response envelope every tool answers with, as types: for tests and clients that read
/// it back.
pub mod envelope {
    pub use fusion_runtime::envelope::{
        ClientForm, Const, CutReason, DataText, Dropped, Envelope, ErrorBody, ErrorFacts, Failure,
        Meta, Success, SuggestedCall, Truncated, UI_EXTENSION,
    };
}

/// Resources and prompts as the protocol serves them: cache hints and not-found codes.
pub mod content {
    pub use fusion_runtime::content::{IMMUTABLE_TTL_MS, is_not_found};
}

/// Request state tokens: values a tool hands the agent and gets back unforged.
pub mod request_state {
    pub use fusion_runtime::request_state::{
        Binding, MIN_SECRET_LEN, StateError, StateKey, StateKeys,
    };
}

pub mod testing {
    // Inside the module, so that the guide's links resolve to its items.
    #![doc = include_str!("docs/testing.md")]
    /// Counting what an agent pays, in tokens (feature `tokens`).
    #[cfg(feature = "tokens")]
    pub use fusion_runtime::testing::{AnswerTokens, O200k, Tokenizer};
    pub use fusion_runtime::testing::{
        Dropped, Elicited, Question, ReceivedUiBlock, SAMPLING_MODEL, TestResult, Tester,
    };
}

/// HTTP proxy tools: upstream configuration, routes, requests and decoding (SPEC T6).
pub mod upstream {
    pub use fusion_runtime::upstream::{
        BodyEncoding, DecodeError, EncodedBody, FromUpstream, HttpMethod, HttpRoute, PathSegment,
        Placement, RouteSegment, SegmentError, Upstream, UpstreamFields, UpstreamRequest,
        encode_segment, kinds,
    };
    #[cfg(feature = "http-client")]
    pub use fusion_runtime::upstream::{
        HttpUpstream, HttpUpstreamBuilder, UpstreamConfigError, classify, upstream_codes,
    };
}
/// Values read from an upstream's answer: models declared `#[model(upstream)]`.
pub use fusion_runtime::upstream::FromUpstream;
/// The upstream HTTP proxy tools call (feature `http-client`).
#[cfg(feature = "http-client")]
pub use fusion_runtime::upstream::HttpUpstream;

/// The Model Context Protocol's own types, from [`rmcp`](https://docs.rs/rmcp), the
/// implementation Fusion serves with, at the version it uses.
///
/// Fusion's API keeps them out of the way of a connector, but some jobs need them: a custom
/// transport ([`serve::McpHandler`] is an rmcp `ServerHandler`), a test that drives a server
/// with rmcp's client, a context factory that reads a request's `_meta`
/// (`protocol::model::RequestMetaObject`), or the `protocol::model::Tool` definitions
/// [`testing::Tester::list_tools`] returns. Re-exported deliberately, under a name that says
/// what it is.
pub use fusion_runtime::rmcp as protocol;

/// The crates whose types appear in Fusion's API, at the versions Fusion uses: a connector can
/// name them through `fusion` instead of depending on them itself (and [`macro@data`] derives
/// through them).
#[cfg(feature = "http")]
pub use axum;
pub use schemars;
pub use serde;
pub use serde_json;

/// The rules Fusion enforces when a connector compiles, as the traits and the type a compiler
/// error names when code breaks one: "the trait `rules::CarriesHiddenValue<'_, String>` is
/// not implemented for `rules::TheWire`" reads "the wire does not carry a hidden `String`", and
/// "expected `rules::NotASecret`, found `String`" says what it carries instead (the markers
/// `PresenterView`, `FillableProfile` and `NotASecret` have no values).
///
/// None of them is for use in code, and none is implemented where its rule is broken; they are
/// public so that an error names them here rather than in Fusion's internals.
pub mod rules {
    pub use crate::__private::HandlerReturn;
    pub use fusion_runtime::args::kinds::{
        ArgumentNameIsFree, HiddenValuesStayOutOfMessages, ModelsAreNeverParameters,
        ModelsStayOutOfMessages, ToolParameter,
    };
    pub use fusion_runtime::hidden::HiddenValue;
    pub use fusion_runtime::model::kinds::MarkedHidden;
    pub use fusion_runtime::model::{
        ModelsNeverImplementDeserialize, ModelsNeverImplementSerialize,
        SerializableTypesAreNeverModels,
    };
    pub use fusion_runtime::resource::NotAVariable;
    pub use fusion_runtime::spec::OutputPresenter;
    pub use fusion_runtime::upstream::kinds::ArgumentIsNotGuarded;
    pub use fusion_runtime::wire::{
        AcceptsRawModel, CarriesHiddenValue, CarriesRawModel, ComparedOnlyWithMatches,
        DescribesRawModel, FillableProfile, HashedOnlyWithKeyedDigest, NeverOrderedUseMatches,
        NotASecret, PresenterView, TheWire,
    };

    /// The checks generated code runs against the rules above, named here so that a note
    /// "required by a bound in …" points at a rule rather than at Fusion's internals.
    pub mod checks {
        pub use fusion_runtime::args::kinds::{
            FieldParam, HiddenInMessage, ModelInMessage, ModelParam, UnusableParam,
        };
        pub use fusion_runtime::model::kinds::{UnmarkedHidden, hidden_field};
        pub use fusion_runtime::present::PresentedField;
        pub use fusion_runtime::resource::not_a_variable;

        /// A presenter's expansion, run by its model's `#[model]` (which knows the fields).
        #[doc(hidden)]
        pub use fusion_macros::__presenter_for_model as presenter_for_model;
    }
}

/// Used by generated code. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use core::option::Option::{self, None, Some};
    pub use core::result::Result::{self, Err, Ok};
    pub use std::{borrow::Cow, boxed::Box, fmt, pin::Pin, string::String, vec::Vec};

    pub use ::schemars;
    pub use ::serde;
    pub use ::serde_json;

    pub use fusion_macros::__presenter_for_model;
    pub use fusion_runtime::args::ArgReader;
    pub use fusion_runtime::args::constrain;
    pub use fusion_runtime::args::kinds;
    pub use fusion_runtime::model::kinds as model_kinds;
    pub use fusion_runtime::model::{
        FieldAt, ModelsNeverImplementDeserialize, ModelsNeverImplementSerialize, present_field,
        profile,
    };
    pub use fusion_runtime::present::{
        PresentableSchema, PresentedField, PresentedSchema, PresenterOf, UnpresentableSchema,
        is_required, nested, object_schema,
    };
    pub use fusion_runtime::resource::not_a_variable;
    pub use fusion_runtime::upstream::Upstream;
    pub use fusion_runtime::upstream::kinds as upstream_kinds;
    pub use fusion_runtime::upstream::object as upstream_object;
    pub use fusion_runtime::upstream::{
        DecodeError, FromUpstream, HttpMethod, Placement, UpstreamFields, UpstreamRequest,
    };
    pub use fusion_runtime::wire::{
        AcceptsRawModel, CarriesRawModel, DescribesRawModel, TheWire,
        unreachable_impl as unreachable_model_impl,
    };
    pub use fusion_runtime::{
        ArgumentGroup, CacheHint, CallContext, Concurrency, ErrorCatalog, FieldInfo, Fillable,
        Model, ModelFields, Nested, NestedPresenter, Params, Plain, Presented, Presenter,
        PresenterInfo, Prompt, PromptSpec, RateLimit, Resource, ResourceSpec, Serialization,
        Suggestion, TaskSupport, Tool, ToolError, ToolSpec, UiBlock, Verb,
    };

    /// A tool handler's return value taken apart. Implemented for `Result` only, and used by
    /// `#[tool]` on the handler's return type, so that a handler returning anything else is
    /// reported once, there: a failed projection leaves nothing for later bounds to report.
    #[diagnostic::on_unimplemented(
        message = "a tool handler returns `Result<T, E>`, not `{Self}`",
        label = "not a `Result`"
    )]
    pub trait HandlerReturn {
        /// The success type.
        type Ok;
        /// The error type.
        type Err;
        /// The value as the `Result` it is.
        fn into_result(self) -> Result<Self::Ok, Self::Err>;
    }

    impl<T, E> HandlerReturn for Result<T, E> {
        type Ok = T;
        type Err = E;
        #[inline]
        fn into_result(self) -> Self {
            self
        }
    }
}
