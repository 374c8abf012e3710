//! Log messages to the client (`notifications/message`), at the level the client asked for.
//!
//! A handler takes [`Log`] from its context and writes (`log.info("Imported 40 rows").await`).
//! A message reaches the client only when the client asked for its level or a lower one:
//! with `logging/setLevel` on a 2025-11-25 session (the level holds for the session's later
//! requests), or with `_meta["io.modelcontextprotocol/logLevel"]` on a 2026-07-28 request (for
//! that request). A client that asked for no level gets no message, so logging costs nothing
//! unless someone listens, and a log line never reaches a client that did not want it.
//!
//! What a handler logs goes to the client as written: the same care applies as to any text an
//! agent may read (no hidden value, no secret). For the operator's own logs, use `tracing`.
//!
//! Logging is deprecated by the protocol (SEP-2577); Fusion serves it to clients that ask for
//! it, behind its own [`LogLevel`].

// rmcp marks logging deprecated (SEP-2577); this module is where Fusion speaks it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use serde::Serialize;
use serde_json::Value;

use crate::context::{CallContext, FromContext};
use crate::error::ToolError;

/// The severity of a log message (RFC 5424), from the least to the most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// What happened.
    Info,
    /// Normal but significant.
    Notice,
    /// Something to look at.
    Warning,
    /// Something failed.
    Error,
    /// A component failed.
    Critical,
    /// Act now.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    pub(crate) fn from_wire(level: LoggingLevel) -> LogLevel {
        match level {
            LoggingLevel::Debug => LogLevel::Debug,
            LoggingLevel::Info => LogLevel::Info,
            LoggingLevel::Notice => LogLevel::Notice,
            LoggingLevel::Warning => LogLevel::Warning,
            LoggingLevel::Error => LogLevel::Error,
            LoggingLevel::Critical => LogLevel::Critical,
            LoggingLevel::Alert => LogLevel::Alert,
            LoggingLevel::Emergency => LogLevel::Emergency,
        }
    }

    pub(crate) fn to_wire(self) -> LoggingLevel {
        match self {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Notice => LoggingLevel::Notice,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
            LogLevel::Critical => LoggingLevel::Critical,
            LogLevel::Alert => LoggingLevel::Alert,
            LogLevel::Emergency => LoggingLevel::Emergency,
        }
    }
}

/// Where a request's log messages go, and from which level: put in the call's extensions by
/// the transport when the client asked for a level.
pub(crate) struct LogSink {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) level: LogLevel,
}

/// Writes log messages to the client (see the [module docs](self)).
#[derive(Clone)]
pub struct Log {
    sink: Option<Arc<LogSink>>,
    logger: Option<Arc<str>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("level", &self.sink.as_ref().map(|sink| sink.level))
            .field("logger", &self.logger)
            .finish()
    }
}

impl FromContext for Log {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(Log {
            sink: context.extensions().get::<Arc<LogSink>>().cloned(),
            logger: None,
        })
    }
}

impl Log {
    /// Whether a message of `level` reaches the client.
    pub fn enabled(&self, level: LogLevel) -> bool {
        self.sink.as_ref().is_some_and(|sink| level >= sink.level)
    }

    /// The same, naming `logger` as the source of its messages.
    #[must_use]
    pub fn named(&self, logger: impl Into<String>) -> Log {
        Log {
            sink: self.sink.clone(),
            logger: Some(logger.into().into()),
        }
    }

    /// Sends `data` (any JSON: a sentence, an object) at `level`, when the client asked for
    /// that level. A message the client cannot receive (it went away) is dropped: logging is
    /// advice, the request goes on.
    pub async fn log(&self, level: LogLevel, data: impl Serialize) {
        let Some(sink) = self.sink.as_ref().filter(|sink| level >= sink.level) else {
            return;
        };
        let data = serde_json::to_value(data).unwrap_or(Value::Null);
        let mut message = LoggingMessageNotificationParam::new(level.to_wire(), data);
        if let Some(logger) = &self.logger {
            message = message.with_logger(logger.to_string());
        }
        if let Err(error) = sink.peer.notify_logging_message(message).await {
            tracing::debug!(%error, "log message not delivered");
        }
    }

    /// Sends a `debug` message.
    pub async fn debug(&self, message: impl Into<String>) {
        self.log(LogLevel::Debug, message.into()).await;
    }

    /// Sends an `info` message.
    pub async fn info(&self, message: impl Into<String>) {
        self.log(LogLevel::Info, message.into()).await;
    }

    /// Sends a `notice` message.
    pub async fn notice(&self, message: impl Into<String>) {
        self.log(LogLevel::Notice, message.into()).await;
    }

    /// Sends a `warning` message.
    pub async fn warning(&self, message: impl Into<String>) {
        self.log(LogLevel::Warning, message.into()).await;
    }

    /// Sends an `error` message.
    pub async fn error(&self, message: impl Into<String>) {
        self.log(LogLevel::Error, message.into()).await;
    }
}
