//! Reading one call's arguments, and the `VALIDATION_ERROR` that names every issue at once.

use rmcp::model::JsonObject;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::ArgLayout;
use super::explain::{Issue, describe, explain};
use crate::error::{ToolError, codes};
use crate::model::ArgumentGroup;

/// The most issues a `VALIDATION_ERROR` lists.
const MAX_ISSUES: usize = 20;

/// Reads one call's arguments. Every value is deserialized by reference from the arguments
/// the agent sent, so that when anything is wrong the whole object can be explained against
/// the input schema, every issue at once.
#[derive(Debug)]
pub struct ArgReader<'l> {
    args: Value,
    layout: &'l ArgLayout,
    tool: &'l str,
    /// The first deserialization error, kept in case the schema explains nothing.
    failed: Option<String>,
}

impl<'l> ArgReader<'l> {
    pub(crate) fn new(args: JsonObject, layout: &'l ArgLayout, tool: &'l str) -> Self {
        ArgReader {
            args: Value::Object(args),
            layout,
            tool,
            failed: None,
        }
    }

    fn object(&self) -> &Map<String, Value> {
        match &self.args {
            Value::Object(object) => object,
            // The reader is only ever built from an object.
            _ => unreachable_object(),
        }
    }

    /// Reads plain argument `name`.
    pub fn field<T: DeserializeOwned>(&mut self, name: &str) -> Option<T> {
        let value = self.object().get(name).unwrap_or(&Value::Null);
        match T::deserialize(value) {
            Ok(value) => Some(value),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Reads a group of arguments.
    pub fn group<G: ArgumentGroup>(&mut self) -> Option<G> {
        let result = if self.layout.sole_group {
            G::deserialize(&self.args)
        } else {
            // Only this group's own fields: the others belong to other parameters.
            let object = self.object();
            let own: Map<String, Value> = G::FIELDS
                .iter()
                .filter_map(|name| {
                    object
                        .get(*name)
                        .map(|value| ((*name).to_owned(), value.clone()))
                })
                .collect();
            G::deserialize(&Value::Object(own))
        };
        match result {
            Ok(group) => Some(group),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Reads all arguments into one type (the tool's only parameter).
    pub fn whole<A: DeserializeOwned>(&mut self) -> Option<A> {
        match A::deserialize(&self.args) {
            Ok(args) => Some(args),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Ends reading: any unknown argument or any value that did not fit is a
    /// `VALIDATION_ERROR` listing every issue.
    pub fn finish(self) -> Result<(), ToolError> {
        // A key that names a guarded field reaches nothing, whatever serde would make of it.
        if let Some(path) = self
            .layout
            .undeclared_guarded
            .as_ref()
            .and_then(|keys| keys.find_nested(&self.args))
        {
            let issue = Issue {
                path,
                problem: "unknown field".to_owned(),
                expected: "not an argument of this tool".to_owned(),
                sent: None,
            };
            return Err(validation_error(self.tool, &[issue]));
        }
        let unknown = self
            .object()
            .keys()
            .any(|key| !self.layout.accepted.iter().any(|accepted| accepted == key));
        let constraints = self.layout.constraints.as_ref();
        if self.failed.is_none()
            && !unknown
            && constraints.is_none_or(|constraints| constraints.is_valid(&self.args))
        {
            return Ok(());
        }
        let layout = self.layout;
        let withheld = &layout.withheld;
        let mut issues = explain(&self.layout.schema, &self.args, MAX_ISSUES, withheld);
        if issues.is_empty()
            && let Some(constraints) = constraints
        {
            issues = constraints.issues(&self.args, MAX_ISSUES, withheld);
        }
        if issues.is_empty() {
            // serde refused what the schema allows: report serde's own words, unless a hidden
            // value was sent, which they might quote.
            let carries_hidden = withheld.carried_by(self.object());
            let failed = self.failed.filter(|_| !carries_hidden);
            issues.push(Issue {
                path: String::new(),
                problem: failed.unwrap_or_else(|| "invalid arguments".to_owned()),
                expected: describe(&self.layout.schema),
                sent: None,
            });
        }
        Err(validation_error(self.tool, &issues))
    }

    #[cold]
    fn fail(&mut self, error: serde_json::Error) {
        if self.failed.is_none() {
            self.failed = Some(error.to_string());
        }
    }
}

#[cold]
fn unreachable_object() -> ! {
    unreachable!("ArgReader is always built from a JSON object")
}

/// A `VALIDATION_ERROR` naming each field, what was sent and what was expected.
pub(crate) fn validation_error(tool: &str, issues: &[Issue]) -> ToolError {
    let message = match issues {
        [] => format!("The arguments for `{tool}` are invalid."),
        [one] => format!(
            "The arguments for `{tool}` are invalid: {}.",
            describe_issue(one)
        ),
        many => format!(
            "The arguments for `{tool}` are invalid ({} problems): {}.",
            many.len(),
            many.iter()
                .map(describe_issue)
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    let details: Vec<Value> = issues
        .iter()
        .map(|issue| {
            serde_json::json!({
                "field": issue.path,
                "problem": issue.problem,
                "expected": issue.expected,
                "sent": issue.sent,
            })
        })
        .collect();
    ToolError::new(codes::VALIDATION_ERROR, message)
        .with_recovery(
            "Correct the listed fields and call again; the tool's input schema describes every argument.",
        )
        .with_details(serde_json::json!({ "issues": details }))
}

fn describe_issue(issue: &Issue) -> String {
    let field = if issue.path.is_empty() {
        "arguments".to_owned()
    } else {
        format!("`{}`", issue.path)
    };
    let mut text = format!("{field}: {}", issue.problem);
    if issue.problem == "unknown field" {
        text.push_str(&format!(" ({})", issue.expected));
    } else {
        text.push_str(&format!(" (expected {}", issue.expected));
        if let Some(sent) = &issue.sent {
            text.push_str(&format!(", sent {sent}"));
        }
        text.push(')');
    }
    text
}
