//! The token budget of a surface: what each tool's definition costs an agent, in tokens, and
//! what its worst answer costs (a full page at its presenter's limit), as recorded in the
//! lockfile, and how a change to either is classified. Growth past the author's threshold is
//! risky (every conversation that loads the connector, or every call, pays for it), and so is
//! an answer that loses its bound; a new budget, or a new threshold, is a reviewed change;
//! anything smaller is cosmetic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diff::{Change, SERVER};
use crate::rules::Rule;

/// The threshold of a new budget: growth of more than 10 % is risky.
pub const DEFAULT_THRESHOLD_PERCENT: u64 = 10;

/// What each tool's definition costs, in tokens, and how much growth is risky.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBudget {
    /// The tokenizer that counted (`o200k_base`).
    pub tokenizer: String,
    /// Growth of a definition beyond this percentage of its recorded tokens is risky.
    pub threshold_percent: u64,
    /// The tokens of each tool's definition as `tools/list` shows it, by exposed tool name.
    pub definitions: BTreeMap<String, u64>,
    /// The tokens of the worst answer of each action with a presenter, by action key: a full
    /// page at the presenter's limit (or one item), its values at nominal sizes
    /// ([`sample`](crate::sample)), with its rules, truncation notice and invalidations as a
    /// client on the current protocol reads them. `None` when nothing bounds it (a collection
    /// with neither an agent limit nor an egress budget). Absent from lockfiles written before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<String, Option<u64>>,
}

impl TokenBudget {
    /// The most tokens `recorded` may grow to before the growth is risky.
    pub fn allowance(&self, recorded: u64) -> u64 {
        recorded.saturating_add(recorded.saturating_mul(self.threshold_percent) / 100)
    }
}

/// The changes of the budget from `old` to `new`. A surface measured without a tokenizer (the
/// start-up check of a server built without the `tokens` feature) has no budget: nothing is
/// compared then.
pub(crate) fn changes(old: Option<&TokenBudget>, new: Option<&TokenBudget>) -> Vec<Change> {
    let (old, new) = match (old, new) {
        (_, None) => return Vec::new(),
        (None, Some(new)) => {
            let total: u64 = new.definitions.values().sum();
            return vec![change(
                SERVER,
                Rule::TokenBudgetSet,
                format!(
                    "token budget recorded: {total} tokens for {} tools and the worst answers of {} actions ({}), growth past {} % is risky",
                    new.definitions.len(),
                    new.answers.len(),
                    new.tokenizer,
                    new.threshold_percent
                ),
            )];
        }
        (Some(old), Some(new)) => (old, new),
    };
    let mut found = Vec::new();
    if old.tokenizer != new.tokenizer || old.threshold_percent != new.threshold_percent {
        found.push(change(
            SERVER,
            Rule::TokenBudgetSet,
            format!(
                "token budget changed from {} % ({}) to {} % ({})",
                old.threshold_percent, old.tokenizer, new.threshold_percent, new.tokenizer
            ),
        ));
    }
    // Tools added or removed are reported as such by the actions' rules; a budget compares the
    // tools both sides list.
    for (tool, &now) in &new.definitions {
        let Some(&was) = old.definitions.get(tool) else {
            continue;
        };
        if now == was {
            continue;
        }
        found.push(growth(
            old,
            tool,
            "definition",
            "every conversation that loads the connector pays for it",
            was,
            now,
        ));
    }
    // A lockfile written before answers were measured has none: nothing to compare then.
    for (action, &now) in &new.answers {
        let Some(&was) = old.answers.get(action) else {
            continue;
        };
        match (was, now) {
            (Some(was), Some(now)) if was == now => {}
            (Some(was), Some(now)) => found.push(growth(
                old,
                action,
                "worst answer",
                "every full page costs the agent that much more",
                was,
                now,
            )),
            (Some(was), None) => found.push(change(
                action,
                Rule::TokensGrew,
                format!(
                    "worst answer was {was} tokens and is no longer bounded: its collection has no agent limit and no egress budget now"
                ),
            )),
            (None, Some(now)) => found.push(change(
                action,
                Rule::TokensChanged,
                format!("worst answer is bounded now, at {now} tokens"),
            )),
            (None, None) => {}
        }
    }
    found
}

/// `what` of `subject` went from `was` to `now` tokens: risky past `old`'s threshold (`cost`
/// says who pays), cosmetic within it.
fn growth(old: &TokenBudget, subject: &str, what: &str, cost: &str, was: u64, now: u64) -> Change {
    let percent = (now as f64 - was as f64) * 100.0 / (was.max(1) as f64);
    if now > old.allowance(was) {
        change(
            subject,
            Rule::TokensGrew,
            format!(
                "{what} grew from {was} to {now} tokens ({percent:+.0} %, over the {} % threshold): {cost}",
                old.threshold_percent
            ),
        )
    } else {
        change(
            subject,
            Rule::TokensChanged,
            format!("{what} went from {was} to {now} tokens ({percent:+.0} %)"),
        )
    }
}

fn change(subject: &str, rule: Rule, reason: String) -> Change {
    Change {
        rule,
        subject: subject.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Class;

    fn budget(threshold: u64, tools: &[(&str, u64)]) -> TokenBudget {
        TokenBudget {
            tokenizer: "o200k_base".into(),
            threshold_percent: threshold,
            definitions: tools
                .iter()
                .map(|(tool, tokens)| ((*tool).to_owned(), *tokens))
                .collect(),
            answers: BTreeMap::new(),
        }
    }

    fn rules(changes: &[Change]) -> Vec<(Rule, &str)> {
        changes
            .iter()
            .map(|change| (change.rule, change.subject.as_str()))
            .collect()
    }

    #[test]
    fn growth_past_the_threshold_is_risky_and_within_it_cosmetic() {
        let old = budget(10, &[("a", 200), ("b", 200), ("c", 200), ("d", 200)]);
        let new = budget(
            10,
            &[("a", 220), ("b", 221), ("c", 150), ("d", 200), ("e", 999)],
        );
        let found = changes(Some(&old), Some(&new));
        assert_eq!(
            rules(&found),
            [
                (Rule::TokensChanged, "a"),
                (Rule::TokensGrew, "b"),
                (Rule::TokensChanged, "c"),
            ]
        );
        assert_eq!(found[1].class(), Class::Risky);
        assert!(
            found[1].reason.contains("from 200 to 221 tokens (+10 %"),
            "{}",
            found[1].reason
        );
    }

    #[test]
    fn an_answer_past_the_threshold_or_unbounded_is_risky() {
        let answers = |entries: &[(&str, Option<u64>)]| {
            let mut budget = budget(10, &[]);
            budget.answers = entries
                .iter()
                .map(|(action, tokens)| ((*action).to_owned(), *tokens))
                .collect();
            budget
        };
        let old = answers(&[
            ("a.list", Some(1_000)),
            ("a.get", Some(100)),
            ("a.page", Some(500)),
            ("a.all", None),
        ]);
        let new = answers(&[
            ("a.list", Some(1_101)),
            ("a.get", Some(104)),
            ("a.page", None),
            ("a.all", Some(900)),
            ("a.new", Some(5_000)),
        ]);
        let found = changes(Some(&old), Some(&new));
        assert_eq!(
            rules(&found),
            [
                (Rule::TokensChanged, "a.all"),
                (Rule::TokensChanged, "a.get"),
                (Rule::TokensGrew, "a.list"),
                (Rule::TokensGrew, "a.page"),
            ]
        );
        assert!(found[2].reason.contains("from 1000 to 1101 tokens"));
        assert!(found[3].reason.contains("no longer bounded"));
        // A lockfile from before answers were measured compares none.
        assert!(changes(Some(&budget(10, &[])), Some(&new)).is_empty());
    }

    #[test]
    fn a_new_budget_or_threshold_is_reviewed_and_no_measure_compares_nothing() {
        let old = budget(10, &[("a", 200)]);
        let found = changes(None, Some(&old));
        assert_eq!(rules(&found), [(Rule::TokenBudgetSet, SERVER)]);
        assert_eq!(found[0].class(), Class::Safe);
        let looser = budget(25, &[("a", 240)]);
        // The old threshold judges the growth: 20 % is over 10 %.
        assert_eq!(
            rules(&changes(Some(&old), Some(&looser))),
            [(Rule::TokenBudgetSet, SERVER), (Rule::TokensGrew, "a")]
        );
        assert!(changes(Some(&old), None).is_empty());
        assert!(changes(None, None).is_empty());
    }
}
