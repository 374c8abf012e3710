//! The arguments, answers and metrics of the tools that `direct.rs` and `session_calls.rs`
//! call on the paths that answer calls in place.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct Text {
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
pub struct Millis {
    pub millis: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct Echoed {
    pub text: String,
}

/// What a slow tool saw: calls begun, and calls whose path ended (the pipeline reported them
/// to its metrics), with the outcome of the last.
#[derive(Default)]
pub struct Seen {
    pub begun: AtomicUsize,
    pub ended: AtomicUsize,
    pub outcome: Mutex<String>,
}

impl fusion_runtime::Metrics for Seen {
    fn call_finished(&self, report: &fusion_runtime::observe::CallReport<'_>) {
        if report.tool.contains("slow") {
            *self.outcome.lock().unwrap() = report.outcome.to_owned();
            self.ended.fetch_add(1, Ordering::SeqCst);
        }
    }
}
