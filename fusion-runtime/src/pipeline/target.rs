//! What a target of the request path supplies: a built-in tool's action, a resource read, a
//! prompt or a proxied tool differ only in how they are allowed, read, guarded and run.
//! [`Server::serve_target`] runs stages 2 to 9 once for all of them, and [`Ending`] is what
//! the one ending (audit, span, metrics) needs of what a target's call sealed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::JsonObject;

use tracing::Instrument as _;

use super::CatchPanic;
use super::report::Report;
use crate::action::{ActionFacts, ActionInfo, Names};
use crate::audit::AuditError;
use crate::context::CallContext;
use crate::envelope::{Outcome, Sealed, SealedParts, seal_error};
use crate::error::ToolError;
use crate::guard::RateLimiter;
use crate::middleware::{Middleware, run_chain};
use crate::server::{Server, ServerInner};
use crate::waiting::ServerGuards;

/// What differs between the targets of the request path (see the [pipeline](super)).
pub(crate) trait Target: Sync {
    /// What reading the arguments prepares: the handler with its arguments bound.
    type Ready: Send;
    /// What running it gives, before it is sealed.
    type Output: Send;
    /// What its guards hold until it has run (`()` for an unguarded target).
    type Held: Send;

    /// What middleware, spans and reports see of it.
    fn facts(&self) -> &ActionFacts;

    /// The name its span and metrics end under: the exposed tool's, or the method's
    /// (`resources/read`, `prompts/get`).
    fn name(&self) -> &str;

    /// What its failures are sealed with.
    fn sealed(&self) -> &SealedParts;

    /// Whether the audit sink records its successes (the handler may record one itself).
    fn records(&self, _inner: &ServerInner) -> bool {
        true
    }

    /// 2. Whether the caller of `context` may call it; a refusal names it.
    fn check_access(&self, server: &Server, context: &CallContext) -> Result<(), ToolError>;

    /// Its own rate limit, besides the server's.
    fn rate_limiter(&self) -> Option<&RateLimiter> {
        None
    }

    /// The key of its FIFO turn, taken from the raw arguments (used once they are valid).
    fn turn_key(&self, _args: &JsonObject) -> Option<String> {
        None
    }

    /// 3. Reads and validates the arguments.
    fn read(&self, args: JsonObject) -> Result<Self::Ready, ToolError>;

    /// 4. Its middleware, in order.
    fn middleware(&self) -> &[Arc<dyn Middleware>];

    /// Whether it has neither middleware nor guards: stages 4 and 5 are skipped whole.
    fn bare(&self) -> bool {
        self.middleware().is_empty()
    }

    /// 5. Its guards, entered in order for the caller of `context` (shares and turns are
    ///    per tenant); what they hold (if anything) is released when the call ends. Unguarded
    ///    by default: resources and prompts have only the server's rate limit and middleware.
    fn guards(
        &self,
        _key: Option<String>,
        _context: &mut CallContext,
    ) -> impl Future<Output = Result<Option<Self::Held>, ToolError>> + Send {
        std::future::ready(Ok(None))
    }

    /// 6. Runs it with its arguments read.
    fn run(
        &self,
        ready: Self::Ready,
        context: CallContext,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// How long stages 4 to 6 may take.
    fn timeout(&self) -> Option<Duration> {
        self.facts().timeout
    }

    /// What the agent is told when they took longer.
    fn timed_out(&self, timeout: Duration) -> ToolError {
        super::timed_out(timeout)
    }
}

impl Server {
    /// Stages 2 to 9 of a call of `target` whose report `report` started: access and rate
    /// limits, arguments, middleware and guards (held until it has run), then the target itself
    /// within its timeout (which counts from the first middleware), all in the report's span; a
    /// panic anywhere is an `INTERNAL_ERROR`. Then its outcome sealed by `seal`, and the one
    /// ending.
    ///
    /// One `async fn` with one inner future, no deeper than a call's path was before it served
    /// every target: each level is a future moved whole into its caller's.
    pub(crate) async fn serve_target<T: Target, E: Ending>(
        &self,
        target: &T,
        report: Report,
        args: JsonObject,
        mut context: CallContext,
        seal: impl FnOnce(Result<T::Output, ToolError>) -> E,
    ) -> E {
        let inner = &*self.inner;
        let span = &report.span;
        // 2–3, in the span as the stages after them.
        let admitted = {
            let _entered = (!span.is_disabled()).then(|| span.enter());
            self.admit(target, args, &context)
        };
        let outcome = match admitted {
            Err(error) => Err(error),
            Ok((ready, key)) => {
                let rest = async move {
                    // 4–5. Middleware and guards, held until the target is done. Boxed: their
                    // futures would otherwise make every call's future larger; a panic in one
                    // is caught here.
                    let _held = if target.bare() {
                        None
                    } else {
                        let around = async {
                            run_chain(
                                target.middleware(),
                                &mut context,
                                ActionInfo(target.facts()),
                            )
                            .await?;
                            target.guards(key, &mut context).await
                        };
                        CatchPanic::new(Box::pin(around), "a middleware").await?
                    };
                    // 5. Then a slot of the server as a whole, for every target.
                    let _seated = match &inner.server_slots {
                        Some(guard) => Some(ServerGuards::enter(guard, &mut context).await?),
                        None => None,
                    };
                    // 6–7.
                    target.run(ready, context).await
                };
                // Dropping the call's future on expiry stops the target where it waits.
                let timed_out = |timeout| Err(target.timed_out(timeout));
                match (target.timeout(), span.is_disabled()) {
                    (None, true) => rest.await,
                    (None, false) => rest.instrument(span.clone()).await,
                    (Some(timeout), true) => tokio::time::timeout(timeout, rest)
                        .await
                        .unwrap_or_else(|_| timed_out(timeout)),
                    (Some(timeout), false) => tokio::time::timeout(timeout, rest)
                        .instrument(span.clone())
                        .await
                        .unwrap_or_else(|_| timed_out(timeout)),
                }
            }
        };
        // 8. Seal.
        let mut ended = seal(outcome);
        // 9. Report: the audit record of a success (a required one that is lost fails the
        // call), then span and metrics. What the agent is told stays here, never moved.
        let key = target.facts().key.as_str();
        if let &Outcome::Ok { cut } = ended.outcome()
            && let Some(lost) = report.audit(inner, key, target.records(inner), cut).await
        {
            ended = ended.unaudited(&inner.names, target.sealed(), lost);
        }
        report.finish(inner, target.name(), Some(key), ended.outcome());
        ended
    }

    /// Stages 2 and 3: a denied or limited call stops before its arguments are read. The FIFO
    /// key is taken from the raw JSON and used only once the arguments are valid.
    #[inline]
    fn admit<T: Target>(
        &self,
        target: &T,
        args: JsonObject,
        context: &CallContext,
    ) -> Result<(T::Ready, Option<String>), ToolError> {
        target.check_access(self, context)?;
        self.check_rates(target.rate_limiter(), context)?;
        let key = target.turn_key(&args);
        let ready = super::catch_panic("reading the arguments", || target.read(args))??;
        Ok((ready, key))
    }
}

/// What the ending of a call (its audit record, span and metrics) needs of what it sealed.
pub(crate) trait Ending {
    /// How the call ended, as spans, metrics and the audit trail record it.
    fn outcome(&self) -> &Outcome;

    /// What the agent is told instead when the audit record the call requires was lost.
    fn unaudited(self, names: &Names, parts: &SealedParts, error: AuditError) -> Self;
}

/// A tool's call, answered with a result either way.
impl Ending for Sealed {
    fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    fn unaudited(self, names: &Names, parts: &SealedParts, error: AuditError) -> Self {
        seal_error(names, parts, super::report::audit_failed(error))
    }
}

/// How every successful read ends: nothing was cut.
static READ: Outcome = Outcome::Ok { cut: false };

/// A read or prompt, answered with its contents or an error (boxed: failures are rare, and
/// large).
impl<T> Ending for Result<T, Box<Sealed>> {
    fn outcome(&self) -> &Outcome {
        match self {
            Ok(_) => &READ,
            Err(sealed) => &sealed.outcome,
        }
    }

    fn unaudited(self, names: &Names, parts: &SealedParts, error: AuditError) -> Self {
        Err(Box::new(seal_error(
            names,
            parts,
            super::report::read_unaudited(error),
        )))
    }
}
