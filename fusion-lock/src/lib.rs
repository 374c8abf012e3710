//! The capability lockfile of [Fusion](https://docs.rs/fusion) connectors (SPEC L1):
//! `fusion.lock`, a deterministic snapshot of what agents can see of a server and do with it,
//! and the classified diff between two of them.
//!
//! - [`Surface`] is the snapshot: the server's facts and one [`ActionEntry`] per action (its
//!   name and exposure, schemas, annotations, presenter egress, state sync, guards, access);
//!   the runtime builds it from a server (`fusion::lock::surface`), never from source code.
//! - [`Surface::to_lockfile`] writes it as canonical JSON (keys sorted, one member per line,
//!   no timestamps or paths) with a SHA-256 digest per entry and for the whole surface;
//!   [`Lockfile::parse`] reads it back and [`Lockfile::verify`] checks the digests.
//! - [`diff`] compares two surfaces and classifies every change ([`Rule`], [`Class`]):
//!   breaking, risky, safe or cosmetic, each with a one-line reason.
//!
//! This crate has no dependency on the runtime: the `cargo fusion` CLI reads, compares and
//! verifies lockfiles with it alone.
//!
//! ```
//! use fusion_lock::{Class, Lockfile, Rule, diff};
//! # let text = fusion_lock::__example_lockfile();
//! let reviewed = Lockfile::parse(&text)?;
//! assert!(reviewed.verify().is_empty());
//!
//! let mut code = reviewed.surface.clone();
//! code.actions.get_mut("billing.void_invoice").unwrap().annotations.destructive = Some(false);
//! let changes = diff(&reviewed.surface, &code);
//! assert_eq!(changes.worst(), Some(Class::Breaking));
//! assert_eq!(changes.changes()[0].rule, Rule::DestructiveFlipped);
//! # Ok::<_, fusion_lock::LockfileError>(())
//! ```

mod budget;
mod canonical;
mod diff;
mod format;
mod rules;
pub mod sample;
mod schema;
#[cfg(feature = "tokens")]
pub mod tokens;

pub use budget::{DEFAULT_THRESHOLD_PERCENT, TokenBudget};
pub use diff::{Change, Diff, Grouped, SERVER, diff};
pub use format::{
    Access, ActionEntry, Annotations, Audit, Cache, Concurrency, DigestMismatch, Digests, Egress,
    Exposition, Exposure, FORMAT, Guards, Lockfile, LockfileError, PresentedField, PresenterEntry,
    PromptArgumentEntry, PromptEntry, RateLimit, ResourceEntry, Serialization, ServerEntry,
    StateSync, Surface, TaskSupport, Verb,
};
pub use rules::{Class, Rule};

/// A small lockfile for examples (not public API).
#[doc(hidden)]
pub fn __example_lockfile() -> String {
    use std::collections::BTreeMap;
    let action = ActionEntry {
        verb: Verb::Mutation,
        title: Some("Void invoice".into()),
        description: "Voids an invoice.".into(),
        version: None,
        exposure: Exposure {
            tool: "billing_void_invoice".into(),
            action: None,
        },
        annotations: Annotations {
            read_only: Some(false),
            destructive: Some(true),
            idempotent: Some(false),
            open_world: None,
        },
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": false
        }),
        output_schema: serde_json::json!({"type": "string"}),
        egress: Egress::default(),
        state: StateSync {
            invalidates: vec!["billing.*".into()],
            cache: None,
        },
        guards: Guards {
            serialization: Serialization::PerArgument("id".into()),
            ..Guards::default()
        },
        access: Access::default(),
        error_actions: Vec::new(),
        not_guarded: BTreeMap::new(),
        asks_user: false,
        task: None,
    };
    Surface {
        server: ServerEntry {
            name: "billing".into(),
            version: "1.0.0".into(),
            instructions: None,
            exposition: Exposition::Flat,
            access_policy: false,
            audit: None,
            rate_limit: None,
        },
        actions: BTreeMap::from([("billing.void_invoice".into(), action)]),
        resources: BTreeMap::new(),
        prompts: BTreeMap::new(),
        tokens: None,
    }
    .to_lockfile()
}
