//! Errors that guide the agent (SPEC E1–E2) and errors that stop a server from being built.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// The error codes the framework itself produces. Domain errors use their own codes
/// (`InvoiceNotFound` beats `NOT_FOUND`).
///
/// A call naming no tool at all has no code here: MCP answers it with a JSON-RPC error
/// (`-32602`, unknown tool), not a tool result (SPEC E3).
pub mod codes {
    /// The arguments do not match the tool's input schema.
    pub const VALIDATION_ERROR: &str = "VALIDATION_ERROR";
    /// A grouped tool was called with an `action` it does not have.
    pub const UNKNOWN_ACTION: &str = "UNKNOWN_ACTION";
    /// A grouped tool was called without its `action` discriminator.
    pub const MISSING_DISCRIMINATOR: &str = "MISSING_DISCRIMINATOR";
    /// The caller may not use this tool.
    pub const FORBIDDEN: &str = "FORBIDDEN";
    /// The caller is not authenticated.
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    /// The thing asked for does not exist.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// The request conflicts with the current state.
    pub const CONFLICT: &str = "CONFLICT";
    /// Too many calls in a window.
    pub const RATE_LIMITED: &str = "RATE_LIMITED";
    /// The tool is at capacity; retry later.
    pub const SERVER_BUSY: &str = "SERVER_BUSY";
    /// The call took too long.
    pub const TIMEOUT: &str = "TIMEOUT";
    /// The client (or its user) did not answer the call's question in time; nothing was
    /// changed, and the call may be made again.
    pub const NO_ANSWER: &str = "NO_ANSWER";
    /// The client cancelled the request; the handler was stopped.
    pub const CANCELLED: &str = "CANCELLED";
    /// Something failed inside the server; the details are in the server's logs under `errorId`.
    pub const INTERNAL_ERROR: &str = "INTERNAL_ERROR";
    /// The call's change was made, but the audit record it requires could not be written: not
    /// plain success, and not to be retried (see [`audit`](crate::audit)). The record is in the
    /// server's logs under `errorId`.
    pub const AUDIT_FAILED: &str = "AUDIT_FAILED";
}

type Text = Cow<'static, str>;

/// A tool's failure, shaped so that an agent can recover from it (SPEC E1).
///
/// It carries a specific code, a message, a recovery line, the actions the agent may take
/// instead, optional details and a retry window. A handler returns it (or any type that
/// converts into it) as the `Err` of its `Result`.
///
/// Any `std::error::Error` converts into an `INTERNAL_ERROR`: its text is logged with an
/// `errorId` and never sent to the agent. That is why `ToolError` itself does not implement
/// `std::error::Error`, and why domain error types (which keep their own codes) should
/// derive `fusion::ToolError` rather than `std::error::Error`.
///
/// ```
/// use fusion_runtime::ToolError;
/// use std::time::Duration;
///
/// let err = ToolError::new("InvoiceNotFound", "Invoice INV-9 does not exist.")
///     .with_recovery("Call billing.list_invoices to find valid ids.")
///     .with_actions(["billing.list_invoices"])
///     .with_retry_after(Duration::from_secs(2));
/// assert_eq!(err.code(), "InvoiceNotFound");
/// assert!(err.is_retryable());
/// ```
pub struct ToolError {
    // Boxed: errors travel in `Result`s on every call path, which stay one pointer wide.
    inner: Box<Inner>,
}

struct Inner {
    code: Text,
    message: Text,
    recovery: Option<Text>,
    actions: Vec<Text>,
    details: Option<Value>,
    retry_after: Option<Duration>,
    retryable: bool,
    error_id: Option<String>,
    internal: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ToolError {
    /// A failure with a specific code and a message for the agent.
    pub fn new(code: impl Into<Text>, message: impl Into<Text>) -> Self {
        ToolError {
            inner: Box::new(Inner {
                code: code.into(),
                message: message.into(),
                recovery: None,
                actions: Vec::new(),
                details: None,
                retry_after: None,
                retryable: false,
                error_id: None,
                internal: None,
            }),
        }
    }

    /// An internal failure: the agent sees `INTERNAL_ERROR` and an `errorId`; the text of
    /// `source` goes only to the server's logs, under the same `errorId`.
    pub fn internal(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ToolError::new(codes::INTERNAL_ERROR, INTERNAL_MESSAGE)
            .with_recovery(INTERNAL_RECOVERY)
            .with_internal_source(Box::new(source))
    }

    /// An internal failure described by a message that stays in the server's logs.
    pub fn internal_message(log_text: impl Into<String>) -> Self {
        ToolError::internal(LogText(log_text.into()))
    }

    /// `NOT_FOUND` with a message.
    pub fn not_found(message: impl Into<Text>) -> Self {
        ToolError::new(codes::NOT_FOUND, message)
    }

    /// `CONFLICT` with a message.
    pub fn conflict(message: impl Into<Text>) -> Self {
        ToolError::new(codes::CONFLICT, message)
    }

    /// `FORBIDDEN` with a message.
    pub fn forbidden(message: impl Into<Text>) -> Self {
        ToolError::new(codes::FORBIDDEN, message)
    }

    /// `UNAUTHORIZED` with a message.
    pub fn unauthorized(message: impl Into<Text>) -> Self {
        ToolError::new(codes::UNAUTHORIZED, message)
    }

    /// `SERVER_BUSY`: retry after the given time.
    pub fn server_busy(retry_after: Duration) -> Self {
        ToolError::new(
            codes::SERVER_BUSY,
            "The server is at capacity for this tool.",
        )
        .with_recovery("Wait for the retry window, then call again with the same arguments.")
        .with_retry_after(retry_after)
    }

    /// `SERVER_BUSY` for the server as a whole: every call of the caller's tenant (or of
    /// everyone) it can take runs or waits already, whatever the tool.
    pub(crate) fn server_full(retry_after: Duration) -> Self {
        ToolError::new(codes::SERVER_BUSY, "The server is at capacity.")
            .with_recovery("Wait for the retry window, then call again with the same arguments.")
            .with_retry_after(retry_after)
    }

    /// Sets the recovery line: what the agent should do next.
    #[must_use]
    pub fn with_recovery(mut self, recovery: impl Into<Text>) -> Self {
        self.inner.recovery = Some(recovery.into());
        self
    }

    /// Sets the actions the agent may take instead, as canonical keys (`billing.list_invoices`).
    ///
    /// Every key must name a tool of the server: keys declared statically (through a
    /// `fusion::ToolError` derive) are checked when the server is built;
    /// any other key that names no tool is dropped from the response and logged.
    #[must_use]
    pub fn with_actions<I, S>(mut self, actions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Text>,
    {
        self.inner.actions = actions.into_iter().map(Into::into).collect();
        self
    }

    /// Attaches structured details (any JSON) for the agent.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.inner.details = Some(details);
        self
    }

    /// Marks the failure as retryable after the given time.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.inner.retry_after = Some(retry_after);
        self.inner.retryable = true;
        self
    }

    /// Marks the failure as retryable (or not) with the same arguments.
    #[must_use]
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.inner.retryable = retryable;
        self
    }

    pub(crate) fn with_internal_source(
        mut self,
        source: Box<dyn std::error::Error + Send + Sync>,
    ) -> Self {
        self.inner.internal = Some(source);
        self
    }

    /// The error code, e.g. `VALIDATION_ERROR` or `InvoiceNotFound`.
    pub fn code(&self) -> &str {
        &self.inner.code
    }

    /// The message for the agent.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// The recovery line, if any.
    pub fn recovery(&self) -> Option<&str> {
        self.inner.recovery.as_deref()
    }

    /// The actions offered instead, as canonical keys.
    pub fn actions(&self) -> impl ExactSizeIterator<Item = &str> {
        self.inner.actions.iter().map(|action| action.as_ref())
    }

    /// Structured details, if any.
    pub fn details(&self) -> Option<&Value> {
        self.inner.details.as_ref()
    }

    /// When the agent may retry, if it may.
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// Whether the same call may succeed if retried.
    pub fn is_retryable(&self) -> bool {
        self.inner.retryable
    }

    /// The id under which an internal failure was logged; set when the error is sealed.
    pub fn error_id(&self) -> Option<&str> {
        self.inner.error_id.as_deref()
    }

    /// Whether this is an `INTERNAL_ERROR`.
    pub fn is_internal(&self) -> bool {
        self.inner.code == codes::INTERNAL_ERROR
    }

    /// Assigns an error id to an internal error (or any error with hidden text, such as
    /// `AUDIT_FAILED`) and logs its hidden text under it. Called once, where the error is
    /// sealed into a response.
    pub(crate) fn assign_error_id(&mut self, tool: &str) {
        let hides_text = self.is_internal() || self.inner.internal.is_some();
        if !hides_text || self.inner.error_id.is_some() {
            return;
        }
        let error_id = uuid::Uuid::new_v4().simple().to_string();
        match &self.inner.internal {
            Some(source) => tracing::error!(
                error_id = %error_id,
                tool,
                error = %DisplayChain(source.as_ref()),
                "tool failed with an internal error"
            ),
            None => {
                tracing::error!(error_id = %error_id, tool, "tool failed with an internal error")
            }
        }
        self.inner.error_id = Some(error_id);
    }
}

pub(crate) const INTERNAL_MESSAGE: &str = "The tool failed because of an internal error.";
pub(crate) const INTERNAL_RECOVERY: &str =
    "Do not retry blindly: report the errorId to the operator, or try a different action.";

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ToolError");
        debug
            .field("code", &self.inner.code)
            .field("message", &self.inner.message);
        if let Some(recovery) = &self.inner.recovery {
            debug.field("recovery", recovery);
        }
        if !self.inner.actions.is_empty() {
            debug.field("actions", &self.inner.actions);
        }
        if let Some(details) = &self.inner.details {
            debug.field("details", details);
        }
        if let Some(retry_after) = &self.inner.retry_after {
            debug.field("retry_after", retry_after);
        }
        if let Some(error_id) = &self.inner.error_id {
            debug.field("error_id", error_id);
        }
        if let Some(internal) = &self.inner.internal {
            debug.field("internal", &DisplayChain(internal.as_ref()).to_string());
        }
        debug.finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.inner.code, self.inner.message)
    }
}

/// Any standard error becomes an `INTERNAL_ERROR` whose text is logged, never sent.
impl<E> From<E> for ToolError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(source: E) -> Self {
        ToolError::internal(source)
    }
}

/// `value` as an error message may echo it back: whole when it has at most `max_chars`
/// characters, else its first `max_chars` characters followed by `…` and how many more there
/// were. An agent (or an attacker) that sent a megabyte gets a line back, not the megabyte.
///
/// ```
/// use fusion_runtime::echo;
///
/// assert_eq!(echo("INV-7", 16), "INV-7");
/// assert_eq!(echo(&"x".repeat(1000), 4), "xxxx… (996 more characters)");
/// ```
pub fn echo(value: &str, max_chars: usize) -> Cow<'_, str> {
    match value.char_indices().nth(max_chars) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => {
            let more = value[cut..].chars().count();
            let unit = if more == 1 { "character" } else { "characters" };
            Cow::Owned(format!("{}… ({more} more {unit})", &value[..cut]))
        }
    }
}

/// The `INTERNAL_ERROR` of a panic in `stage`; the panic's text is logged, never shown.
#[cold]
pub(crate) fn panicked(stage: &str, panic: Box<dyn std::any::Any + Send>) -> ToolError {
    ToolError::internal_message(format!("{stage} panicked: {}", panic_text(&*panic)))
}

/// The message of a panic payload.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

/// Text kept for the logs of an internal error.
#[derive(Debug)]
struct LogText(String);

impl fmt::Display for LogText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LogText {}

/// Displays an error followed by its sources: `outer: inner: innermost`.
pub(crate) struct DisplayChain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(next) = source {
            write!(f, ": {next}")?;
            source = next.source();
        }
        Ok(())
    }
}

/// Error types whose possible actions are known statically, so that a server can check them
/// when it is built. Derived by `#[derive(fusion::ToolError)]`.
pub trait ErrorCatalog {
    /// The canonical keys of every tool these errors may offer as an available action.
    const ACTIONS: &'static [&'static str];
    /// The tool keys their recovery lines name between backticks: `(type, variant, key)`.
    const RECOVERY_TOOLS: &'static [(&'static str, &'static str, &'static str)] = &[];
}

/// Why a server could not be built. Every problem found is listed, not just the first:
/// the server refuses to start until all of them are fixed (fail closed).
///
/// Its `Debug` is its `Display`, as `anyhow`'s is: `fn main() -> Result<(), BuildError>`
/// prints `Debug`, and a reader of that wants the problems, not the struct.
#[derive(Clone, PartialEq, Eq)]
pub struct BuildError {
    problems: Vec<String>,
    lock: Option<Box<fusion_lock::Diff>>,
    guarded: Vec<crate::guarded::GuardedInput>,
}

impl BuildError {
    pub(crate) fn new(problems: Vec<String>) -> Self {
        BuildError {
            problems,
            lock: None,
            guarded: Vec::new(),
        }
    }

    /// With the inputs named like guarded fields among its problems.
    pub(crate) fn with_guarded_inputs(mut self, inputs: Vec<crate::guarded::GuardedInput>) -> Self {
        self.guarded = inputs;
        self
    }

    /// The inputs through which a guarded field's value would come in (each is among the
    /// [`problems`](BuildError::problems) too): where, which property, which field.
    pub fn guarded_inputs(&self) -> &[crate::guarded::GuardedInput] {
        &self.guarded
    }

    /// The surface differs from the reviewed lockfile by `diff`
    /// ([`ServerBuilder::lock`](crate::ServerBuilder::lock)).
    pub(crate) fn lock(diff: fusion_lock::Diff) -> Self {
        BuildError {
            problems: vec![format!(
                "its surface is not the one reviewed in its lockfile ({})",
                diff.summary()
            )],
            lock: Some(Box::new(diff)),
            guarded: Vec::new(),
        }
    }

    /// Each problem, as one sentence.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// How the surface differs from the reviewed lockfile, when that is why the server was
    /// not built.
    pub fn lock_diff(&self) -> Option<&fusion_lock::Diff> {
        self.lock.as_deref()
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "the server cannot be built: {one}")?,
            many => {
                write!(f, "the server cannot be built ({} problems):", many.len())?;
                for problem in many {
                    write!(f, "\n  - {problem}")?;
                }
            }
        }
        if let Some(diff) = &self.lock {
            for change in diff.changes() {
                write!(f, "\n  {:<8}  {change}", change.class())?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BuildError {}

/// Whether an error code says that what was asked for does not exist: the framework's
/// `NOT_FOUND` (and codes ending in it, such as `TOOL_NOT_FOUND`) or a domain code ending in
/// `NotFound`, such as `InvoiceNotFound`.
pub fn is_not_found(code: &str) -> bool {
    code.ends_with("NOT_FOUND") || code.ends_with("NotFound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct DbDown;
    impl fmt::Display for DbDown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connection refused to db-7.internal:5432")
        }
    }
    impl std::error::Error for DbDown {}

    #[test]
    fn echo_cuts_on_character_boundaries() {
        assert_eq!(echo("", 0), "");
        assert_eq!(echo("abc", 3), "abc");
        assert_eq!(echo("ééé", 2), "éé… (1 more character)");
        assert!(echo(&"é".repeat(4_000_000), 40).len() < 120);
    }

    #[test]
    fn standard_errors_become_internal_without_their_text() {
        let err: ToolError = DbDown.into();
        assert_eq!(err.code(), codes::INTERNAL_ERROR);
        assert!(!err.message().contains("db-7"));
        assert!(!err.to_string().contains("db-7"));
    }

    #[test]
    fn error_id_is_assigned_once_and_only_to_internal_errors() {
        let mut internal: ToolError = DbDown.into();
        internal.assign_error_id("billing_get_invoice");
        let first = internal.error_id().map(str::to_owned);
        internal.assign_error_id("billing_get_invoice");
        assert!(first.is_some());
        assert_eq!(internal.error_id(), first.as_deref());

        let mut domain = ToolError::new("InvoiceNotFound", "missing");
        domain.assign_error_id("billing_get_invoice");
        assert_eq!(domain.error_id(), None);
    }

    #[test]
    fn build_error_lists_every_problem() {
        let err = BuildError::new(vec!["a".into(), "b".into()]);
        assert_eq!(
            err.to_string(),
            "the server cannot be built (2 problems):\n  - a\n  - b"
        );
    }

    #[test]
    fn build_error_debugs_as_it_displays() {
        // What `fn main() -> Result<(), BuildError>` prints after `Error: `.
        let one = BuildError::new(vec!["two tools are named `a`".into()]);
        assert_eq!(
            format!("{one:?}"),
            "the server cannot be built: two tools are named `a`"
        );
        let many = BuildError::new(vec!["a".into(), "b".into()]);
        assert_eq!(format!("{many:?}"), many.to_string());
        assert_eq!(format!("{many:#?}"), many.to_string());
    }
}
