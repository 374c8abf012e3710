//! The classified diff of two surfaces: every change, with its [`Rule`] (and so its class) and
//! a one-line reason.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Value, json};

use crate::canonical;
use crate::format::{
    ActionEntry, Audit, Cache, Egress, Exposure, Guards, PresenterEntry, RateLimit, Serialization,
    ServerEntry, Surface, TaskSupport,
};
use crate::rules::{Class, Rule};
use crate::schema::{self, Aspect, Covered, Side};

/// One change between two surfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The kind of change; its class is the rule's.
    pub rule: Rule,
    /// What changed: `server`, or an action's canonical key.
    pub subject: String,
    /// What changed and why it is of its class, on one line.
    pub reason: String,
}

impl Change {
    /// The class of the change.
    pub fn class(&self) -> Class {
        self.rule.class()
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.subject, self.reason)
    }
}

/// Every change from one surface to another, the most serious first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diff {
    changes: Vec<Change>,
}

/// The subject of server-level changes.
pub const SERVER: &str = "server";

/// Compares the surface `old` (the reviewed one, say) with `new` (the code's).
pub fn diff(old: &Surface, new: &Surface) -> Diff {
    let old = without_inapplicable_limits(old.normalized());
    let new = without_inapplicable_limits(new.normalized());
    let mut changes = Vec::new();
    server(&old.server, &new.server, &mut changes);

    let mut added: Vec<&String> = new
        .actions
        .keys()
        .filter(|key| !old.actions.contains_key(*key))
        .collect();
    for (key, entry) in &old.actions {
        let mut out = Changes::new(key, &mut changes);
        match new.actions.get(key) {
            Some(now) => action(entry, now, &mut out),
            None => match added
                .iter()
                .position(|other| same_but_name(entry, &new.actions[*other]))
            {
                Some(index) => {
                    let to = added.remove(index);
                    out.push(
                        Rule::ActionRenamed,
                        format!(
                            "renamed to `{to}`: agents call `{}` instead of `{}`",
                            new.actions[to].exposure, entry.exposure
                        ),
                    );
                }
                None => out.push(
                    Rule::ActionRemoved,
                    format!(
                        "removed: agents calling `{}` get UNKNOWN_TOOL",
                        entry.exposure
                    ),
                ),
            },
        }
    }
    for key in added {
        let entry = &new.actions[key];
        Changes::new(key, &mut changes).push(
            Rule::ActionAdded,
            format!(
                "new {}, called as `{}`",
                entry.verb.as_str(),
                entry.exposure
            ),
        );
    }
    content(&old, &new, &mut changes);
    changes.extend(crate::budget::changes(
        old.tokens.as_ref(),
        new.tokens.as_ref(),
    ));
    // The most serious first; the server before its actions; otherwise in the order found.
    changes.sort_by_key(|change| {
        (
            Reverse(change.class()),
            change.subject != SERVER,
            change.subject.clone(),
        )
    });
    Diff { changes }
}

impl Diff {
    /// Every change, the most serious first.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Whether the surfaces are the same.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The class of the most serious change.
    pub fn worst(&self) -> Option<Class> {
        self.changes.iter().map(Change::class).max()
    }

    /// How many changes are of `class`.
    pub fn count(&self, class: Class) -> usize {
        self.changes
            .iter()
            .filter(|change| change.class() == class)
            .count()
    }

    /// Whether a change is of class `fail_on` or more serious.
    pub fn fails(&self, fail_on: Class) -> bool {
        self.worst().is_some_and(|worst| worst >= fail_on)
    }

    /// `3 changes: 1 breaking, 2 risky`, or `no changes`.
    pub fn summary(&self) -> String {
        if self.changes.is_empty() {
            return "no changes".into();
        }
        let counts: Vec<String> = Class::ALL
            .iter()
            .rev()
            .filter_map(|&class| {
                let count = self.count(class);
                (count > 0).then(|| format!("{count} {class}"))
            })
            .collect();
        let n = self.changes.len();
        format!(
            "{n} change{}: {}",
            if n == 1 { "" } else { "s" },
            counts.join(", ")
        )
    }

    /// The summary, then one line per change: its class, its subjects and the reason. One
    /// change seen from many subjects (a presenter's new field, in every tool, resource and
    /// prompt that presents it) is one line naming them all.
    pub fn to_text(&self) -> String {
        let mut text = self.summary();
        text.push('\n');
        for group in self.grouped() {
            text.push_str(&format!(
                "  {:<8}  {}: {}\n",
                group.class,
                group.subjects.join(", "),
                group.reason
            ));
        }
        text
    }

    /// The changes grouped by what changed: one entry per class and reason, naming every
    /// subject it was found in, in the order of the changes.
    pub fn grouped(&self) -> Vec<Grouped<'_>> {
        let mut groups: Vec<Grouped<'_>> = Vec::new();
        for change in &self.changes {
            let class = change.class();
            match groups
                .iter_mut()
                .find(|group| group.class == class && group.reason == change.reason)
            {
                Some(group) => {
                    if !group.subjects.contains(&change.subject.as_str()) {
                        group.subjects.push(&change.subject);
                    }
                }
                None => groups.push(Grouped {
                    class,
                    reason: &change.reason,
                    subjects: vec![&change.subject],
                }),
            }
        }
        groups
    }

    /// A Markdown table, for a pull request's comment.
    pub fn to_markdown(&self) -> String {
        let mut text = format!("**{}**\n", self.summary());
        if self.changes.is_empty() {
            return text;
        }
        text.push_str("\n| class | subject | change |\n|---|---|---|\n");
        for group in self.grouped() {
            let subjects: Vec<String> = group
                .subjects
                .iter()
                .map(|subject| format!("`{subject}`"))
                .collect();
            text.push_str(&format!(
                "| {} | {} | {} |\n",
                group.class,
                subjects.join(", "),
                group.reason.replace('|', "\\|")
            ));
        }
        text
    }

    /// The changes as JSON: `{"changes": [{"class", "rule", "subject", "reason"}], "counts"}`.
    pub fn to_json(&self) -> Value {
        let counts: serde_json::Map<String, Value> = Class::ALL
            .iter()
            .map(|&class| (class.as_str().to_owned(), self.count(class).into()))
            .collect();
        json!({
            "changes": self.changes.iter().map(|change| json!({
                "class": change.class().as_str(),
                "rule": change.rule.id(),
                "subject": change.subject,
                "reason": change.reason,
            })).collect::<Vec<_>>(),
            "counts": counts,
        })
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// One change as the text and Markdown show it: its class and reason, and every subject it was
/// found in (see [`Diff::grouped`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouped<'a> {
    /// The class of the change.
    pub class: Class,
    /// What changed, on one line.
    pub reason: &'a str,
    /// The subjects it was found in: `server`, actions', resources' and prompts' keys.
    pub subjects: Vec<&'a str>,
}

/// The surface with the agent limits that cut nothing left out: a presenter's limit applies to
/// the lists it presents, not to a single item (or a prompt), so changing it changes nothing
/// there.
fn without_inapplicable_limits(mut surface: Surface) -> Surface {
    for action in surface.actions.values_mut() {
        action.egress.limit = action.egress.applied_limit(&action.output_schema);
    }
    for resource in surface.resources.values_mut() {
        resource.egress.limit = resource.egress.applied_limit(&resource.output_schema);
    }
    surface
}

/// The changes of one subject.
pub(crate) struct Changes<'a> {
    subject: &'a str,
    out: &'a mut Vec<Change>,
}

impl<'a> Changes<'a> {
    fn new(subject: &'a str, out: &'a mut Vec<Change>) -> Self {
        Changes { subject, out }
    }

    pub(crate) fn push(&mut self, rule: Rule, reason: String) {
        self.out.push(Change {
            rule,
            subject: self.subject.to_owned(),
            reason,
        });
    }

    fn found(&self) -> bool {
        self.out.iter().any(|change| change.subject == self.subject)
    }

    /// How many changes of this subject were found so far.
    fn count(&self) -> usize {
        self.out
            .iter()
            .filter(|change| change.subject == self.subject)
            .count()
    }

    /// What no rule caught is a difference of form: an order that does not matter, a
    /// definition's name. Reported, so that every difference of digests has a reason.
    fn form_only(&mut self, old: &impl serde::Serialize, new: &impl serde::Serialize) {
        let old = serde_json::to_value(old).unwrap_or(Value::Null);
        let new = serde_json::to_value(new).unwrap_or(Value::Null);
        if !self.found() && canonical::compact(&old) != canonical::compact(&new) {
            self.push(
                Rule::FormOnly,
                "written otherwise with the same meaning (an order that does not matter, a definition's name)".into(),
            );
        }
    }
}

fn server(old: &ServerEntry, new: &ServerEntry, changes: &mut Vec<Change>) {
    let mut out = Changes::new(SERVER, changes);
    if old.name != new.name {
        out.push(
            Rule::ServerRenamed,
            format!("renamed from `{}` to `{}`", old.name, new.name),
        );
    }
    if old.version != new.version {
        out.push(
            Rule::VersionChanged,
            format!("version {} (was {})", new.version, old.version),
        );
    }
    if old.instructions != new.instructions {
        out.push(
            Rule::InstructionsChanged,
            format!(
                "instructions {}",
                reworded(old.instructions.as_deref(), new.instructions.as_deref())
            ),
        );
    }
    if old.exposition != new.exposition {
        out.push(
            Rule::ExpositionChanged,
            format!(
                "exposition {} (was {}): every namespaced action is called by another name",
                exposition(new.exposition),
                exposition(old.exposition)
            ),
        );
    }
    match (old.access_policy, new.access_policy) {
        (true, false) => out.push(
            Rule::GuardLoosened,
            "access policy removed: every caller sees and may call every tool".into(),
        ),
        (false, true) => out.push(
            Rule::GuardTightened,
            "an access policy decides per request what is listed and callable".into(),
        ),
        _ => {}
    }
    if old.audit != new.audit {
        let strength = |audit: Option<Audit>| match audit {
            None => 0,
            Some(Audit::BestEffort) => 1,
            Some(Audit::Required) => 2,
        };
        let rule = if strength(new.audit) < strength(old.audit) {
            Rule::GuardLoosened
        } else {
            Rule::GuardTightened
        };
        out.push(
            rule,
            format!("audit {} (was {})", audit(new.audit), audit(old.audit)),
        );
    }
    rate_limit("server", old.rate_limit, new.rate_limit, &mut out);
    out.form_only(old, new);
}

fn exposition(exposition: crate::format::Exposition) -> &'static str {
    match exposition {
        crate::format::Exposition::Flat => "flat",
        crate::format::Exposition::Grouped => "grouped",
    }
}

fn audit(audit: Option<Audit>) -> &'static str {
    match audit {
        None => "off",
        Some(Audit::BestEffort) => "best effort",
        Some(Audit::Required) => "required",
    }
}

/// Whether two entries are the same but for the name they are called by.
fn same_but_name(old: &ActionEntry, new: &ActionEntry) -> bool {
    let unnamed = |entry: &ActionEntry| ActionEntry {
        exposure: Exposure {
            tool: String::new(),
            action: None,
        },
        ..entry.clone()
    };
    unnamed(old) == unnamed(new)
}

fn action(old: &ActionEntry, new: &ActionEntry, out: &mut Changes<'_>) {
    if old.verb != new.verb {
        let rule = if old.verb == crate::format::Verb::Query {
            Rule::QueryBecameWrite
        } else {
            Rule::VerbChanged
        };
        out.push(
            rule,
            format!("now a {} (was a {})", new.verb.as_str(), old.verb.as_str()),
        );
    }
    if old.exposure != new.exposure {
        out.push(
            Rule::ExposureChanged,
            format!(
                "agents call `{}` instead of `{}`",
                new.exposure, old.exposure
            ),
        );
    }
    annotations(old, new, out);
    if old.title != new.title {
        out.push(
            Rule::TitleChanged,
            format!(
                "title {}",
                reworded(old.title.as_deref(), new.title.as_deref())
            ),
        );
    }
    if old.description != new.description {
        out.push(
            Rule::DescriptionChanged,
            format!(
                "description {}",
                reworded(Some(&old.description), Some(&new.description))
            ),
        );
    }
    if old.version != new.version {
        out.push(
            Rule::VersionChanged,
            format!(
                "version {} (was {})",
                new.version.as_deref().unwrap_or("the server's"),
                old.version.as_deref().unwrap_or("the server's")
            ),
        );
    }
    schema::compare(
        Side::Input,
        &old.input_schema,
        &new.input_schema,
        &Covered::default(),
        out,
    );
    let covered = egress(&old.egress, &new.egress, out);
    schema::compare(
        Side::Output,
        &old.output_schema,
        &new.output_schema,
        &covered,
        out,
    );
    state(old, new, out);
    guards(&old.guards, &new.guards, out);
    if old.access.toolset != new.access.toolset {
        out.push(
            Rule::ToolsetChanged,
            format!(
                "toolset {} (was {})",
                toolset(new.access.toolset.as_deref()),
                toolset(old.access.toolset.as_deref())
            ),
        );
    }
    scope_changes(&old.access.scopes, &new.access.scopes, out);
    set_changes(&old.access.tags, &new.access.tags, |tag, added| {
        out.push(
            Rule::TagsChanged,
            format!("tag `{tag}` {}", if added { "added" } else { "removed" }),
        );
    });
    not_guarded(&old.not_guarded, &new.not_guarded, out);
    asks_user(old.asks_user, new.asks_user, out);
    task(old.task, new.task, out);
    set_changes(&old.error_actions, &new.error_actions, |key, added| {
        if added {
            out.push(
                Rule::SuggestionAdded,
                format!("an error may offer `{key}` as an available action"),
            );
        } else {
            out.push(
                Rule::SuggestionRemoved,
                format!("no error offers `{key}` any more"),
            );
        }
    });
    out.form_only(old, new);
}

/// The statements that an input is not the guarded field it is named like: a new or reworded
/// one is for a reviewer to read.
fn not_guarded(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    out: &mut Changes<'_>,
) {
    for (path, reason) in new {
        match old.get(path) {
            Some(was) if was == reason => {}
            Some(was) => out.push(
                Rule::NotGuardedStated,
                format!("`{path}` is not a guarded field because \"{reason}\" (was \"{was}\")"),
            ),
            None => out.push(
                Rule::NotGuardedStated,
                format!(
                    "`{path}` is named like a guarded field and stated not to be it: \"{reason}\""
                ),
            ),
        }
    }
    for path in old.keys().filter(|path| !new.contains_key(*path)) {
        out.push(
            Rule::NotGuardedWithdrawn,
            format!("`{path}` is no longer stated not to be a guarded field"),
        );
    }
}

/// Whether the tool asks the user (elicitation): a client that cannot ask gets an error from a
/// tool that now does.
fn asks_user(old: bool, new: bool, out: &mut Changes<'_>) {
    match (old, new) {
        (false, true) => out.push(
            Rule::AsksUserAdded,
            "now asks the user while it runs (elicitation): a client that cannot ask gets ELICITATION_UNSUPPORTED".into(),
        ),
        (true, false) => out.push(
            Rule::AsksUserRemoved,
            "no longer asks the user while it runs".into(),
        ),
        _ => {}
    }
}

/// Whether the tool runs as a task: a client with the tasks extension gets a task id where it got
/// the result; one without it is refused a tool that now runs only as a task.
fn task(old: Option<TaskSupport>, new: Option<TaskSupport>, out: &mut Changes<'_>) {
    let named = |support: Option<TaskSupport>| match support {
        None => "never",
        Some(TaskSupport::Optional) => "optional",
        Some(TaskSupport::Required) => "required",
    };
    let rule = match (old, new) {
        (was, now) if was == now => return,
        (_, Some(TaskSupport::Required)) => Rule::TaskRequired,
        (None, Some(TaskSupport::Optional)) => Rule::TaskOffered,
        _ => Rule::TaskRelaxed,
    };
    out.push(
        rule,
        format!("runs as a task: {} (was {})", named(new), named(old)),
    );
}

fn toolset(toolset: Option<&str>) -> String {
    toolset.map_or_else(|| "none".into(), |toolset| format!("`{toolset}`"))
}

fn annotations(old: &ActionEntry, new: &ActionEntry, out: &mut Changes<'_>) {
    let (old, new) = (&old.annotations, &new.annotations);
    if old.is_read_only() != new.is_read_only() {
        out.push(
            Rule::ReadOnlyFlipped,
            format!(
                "`readOnly` flipped from {} to {}",
                old.is_read_only(),
                new.is_read_only()
            ),
        );
    }
    if old.is_destructive() != new.is_destructive() {
        out.push(
            Rule::DestructiveFlipped,
            format!(
                "`destructive` flipped from {} to {}",
                old.is_destructive(),
                new.is_destructive()
            ),
        );
    }
    match (old.is_idempotent(), new.is_idempotent()) {
        (true, false) => out.push(
            Rule::IdempotencyDropped,
            "no longer `idempotent`: retrying is not declared safe any more".into(),
        ),
        (false, true) => out.push(
            Rule::IdempotencyAdded,
            "declared `idempotent`: retrying is safe".into(),
        ),
        _ => {}
    }
    if old.is_open_world() != new.is_open_world() {
        out.push(
            Rule::OpenWorldChanged,
            format!(
                "`openWorld` flipped from {} to {}",
                old.is_open_world(),
                new.is_open_world()
            ),
        );
    }
}

/// The presenters' changes; returns what they cover of the output schema, so that one change
/// is not reported twice (a presenter's new field is also a new property of the output).
fn egress(old: &Egress, new: &Egress, out: &mut Changes<'_>) -> Covered {
    let mut covered = Covered::default();
    let presenter = new
        .presenter
        .as_deref()
        .or(old.presenter.as_deref())
        .unwrap_or("the result");
    match (old.limit, new.limit) {
        (Some(was), None) => out.push(
            Rule::LimitRaised,
            format!("agent limit of {was} items removed: every item reaches the agent"),
        ),
        (None, Some(now)) => out.push(
            Rule::LimitLowered,
            format!("agent limit of {now} items added"),
        ),
        (Some(was), Some(now)) if now > was => out.push(
            Rule::LimitRaised,
            format!("agent limit raised from {was} to {now} items"),
        ),
        (Some(was), Some(now)) if now < was => out.push(
            Rule::LimitLowered,
            format!("agent limit lowered from {was} to {now} items"),
        ),
        _ => {}
    }
    if old.limit != new.limit {
        covered.insert(Aspect::MaxItems, "data");
    }
    set_changes(&old.ui_kinds, &new.ui_kinds, |kind, added| {
        if added {
            out.push(
                Rule::UiKindAdded,
                format!("egress widened: presenter `{presenter}` may render `{kind}` blocks"),
            );
        } else {
            out.push(
                Rule::UiKindRemoved,
                format!("presenter `{presenter}` no longer renders `{kind}` blocks"),
            );
        }
    });
    set_changes(&old.suggests, &new.suggests, |key, added| {
        if added {
            out.push(
                Rule::SuggestionAdded,
                format!("presenter `{presenter}` may suggest `{key}`"),
            );
        } else {
            out.push(
                Rule::SuggestionRemoved,
                format!("presenter `{presenter}` no longer suggests `{key}`"),
            );
        }
    });
    if let (Some(was), Some(now)) = (&old.presenter, &new.presenter) {
        let mut walk = Walk {
            old: &old.presenters,
            new: &new.presenters,
            visited: BTreeSet::new(),
            covered: &mut covered,
            out,
        };
        walk.presenter("data", was, now);
    }
    covered
}

/// Compares presenters along the fields that nest them, from the result's presenter down.
struct Walk<'a, 'o, 'c> {
    old: &'a BTreeMap<String, PresenterEntry>,
    new: &'a BTreeMap<String, PresenterEntry>,
    /// Pairs compared already: a presenter may nest itself.
    visited: BTreeSet<(&'a str, &'a str)>,
    covered: &'c mut Covered,
    out: &'c mut Changes<'o>,
}

impl<'a> Walk<'a, '_, '_> {
    fn presenter(&mut self, path: &str, was: &'a str, now: &'a str) {
        if !self.visited.insert((was, now)) {
            return;
        }
        let (olds, news) = (self.old, self.new);
        let (Some(old), Some(new)) = (olds.get(was), news.get(now)) else {
            return;
        };
        if was != now {
            self.out.push(
                Rule::PresenterRenamed,
                format!("`{path}` presented by `{now}` (was `{was}`)"),
            );
        }
        if old.model != new.model {
            self.out.push(
                Rule::PresenterRenamed,
                format!(
                    "presenter `{now}` presents model `{}` (was `{}`)",
                    new.model, old.model
                ),
            );
        }
        for (field, presented) in &new.fields {
            let field_path = format!("{path}.{field}");
            match old.fields.get(field) {
                None => {
                    self.out.push(
                        Rule::PresenterFieldAdded,
                        format!("egress widened: presenter `{now}` lets `{field}` out"),
                    );
                    self.covered.insert(Aspect::Added, &field_path);
                }
                Some(before) => {
                    if before.label != presented.label {
                        self.out.push(
                            Rule::LabelChanged,
                            format!(
                                "presenter `{now}`: label of `{field}` {}",
                                reworded(Some(&before.label), Some(&presented.label))
                            ),
                        );
                        self.covered.insert(Aspect::Description, &field_path);
                    }
                    if let (Some(was), Some(now)) = (&before.presenter, &presented.presenter) {
                        self.presenter(&field_path, was, now);
                    }
                }
            }
        }
        for field in old.fields.keys() {
            if !new.fields.contains_key(field) {
                let field_path = format!("{path}.{field}");
                self.out.push(
                    Rule::OutputFieldRemoved,
                    format!("presenter `{now}` no longer presents `{field}`"),
                );
                self.covered.insert(Aspect::Removed, &field_path);
            }
        }
        set_changes(&old.rules, &new.rules, |rule, added| {
            self.out.push(
                Rule::RulesChanged,
                format!(
                    "presenter `{now}`: rule {} {}",
                    if added { "added:" } else { "removed:" },
                    quote(rule)
                ),
            );
        });
    }
}

fn state(old: &ActionEntry, new: &ActionEntry, out: &mut Changes<'_>) {
    set_changes(
        &old.state.invalidates,
        &new.state.invalidates,
        |glob, added| {
            if added {
                out.push(Rule::InvalidationAdded, format!("invalidates `{glob}` too"));
            } else {
                out.push(
                    Rule::InvalidationRemoved,
                    format!("no longer invalidates `{glob}`: agents may act on stale results"),
                );
            }
        },
    );
    let (was, now) = (old.state.cache, new.state.cache);
    if was != now {
        let name = |cache: Option<Cache>| match cache {
            None => "none",
            Some(Cache::Immutable) => "immutable",
            Some(Cache::Volatile) => "volatile",
        };
        let rule = if now == Some(Cache::Immutable) {
            Rule::CacheImmutable
        } else {
            Rule::CacheChanged
        };
        out.push(
            rule,
            format!("cache hint {} (was {})", name(now), name(was)),
        );
    }
}

fn guards(old: &Guards, new: &Guards, out: &mut Changes<'_>) {
    if old.serialization != new.serialization {
        let strength = |serialization: &Serialization| match serialization {
            Serialization::None => 0,
            Serialization::PerArgument(_) => 1,
            Serialization::PerAction => 2,
        };
        let describe = |serialization: &Serialization| match serialization {
            Serialization::None => "not serialized".to_owned(),
            Serialization::PerArgument(argument) => format!("serialized per `{argument}`"),
            Serialization::PerAction => "serialized per action".to_owned(),
        };
        // Another argument is as strict, but calls that were serialized may now overlap.
        let rule = if strength(&new.serialization) > strength(&old.serialization) {
            Rule::GuardTightened
        } else {
            Rule::GuardLoosened
        };
        out.push(
            rule,
            format!(
                "{} (was {})",
                describe(&new.serialization),
                describe(&old.serialization)
            ),
        );
    }
    match (old.concurrency, new.concurrency) {
        (Some(_), None) => out.push(Rule::GuardLoosened, "concurrency limit removed".into()),
        (None, Some(now)) => out.push(
            Rule::GuardTightened,
            format!(
                "concurrency limit added: {} at once, {} queued",
                now.max_active, now.max_queued
            ),
        ),
        (Some(was), Some(now)) if was != now => {
            let rule = if now.max_active > was.max_active || now.max_queued > was.max_queued {
                Rule::GuardLoosened
            } else {
                Rule::GuardTightened
            };
            out.push(
                rule,
                format!(
                    "concurrency {} at once, {} queued, retry after {} (was {}, {}, {})",
                    now.max_active,
                    now.max_queued,
                    millis(now.retry_after_ms),
                    was.max_active,
                    was.max_queued,
                    millis(was.retry_after_ms)
                ),
            );
        }
        _ => {}
    }
    for (old, new, unit) in [
        (old.max_bytes, new.max_bytes, "bytes"),
        (old.max_tokens, new.max_tokens, "tokens"),
    ] {
        match (old, new) {
            (Some(was), None) => out.push(
                Rule::BudgetRaised,
                format!("egress budget of {was} {unit} removed"),
            ),
            (None, Some(now)) => out.push(
                Rule::BudgetLowered,
                format!("egress budget of {now} {unit} added"),
            ),
            (Some(was), Some(now)) if now > was => out.push(
                Rule::BudgetRaised,
                format!("egress budget raised from {was} to {now} {unit}"),
            ),
            (Some(was), Some(now)) if now < was => out.push(
                Rule::BudgetLowered,
                format!("egress budget lowered from {was} to {now} {unit}"),
            ),
            _ => {}
        }
    }
    match (old.timeout_ms, new.timeout_ms) {
        (Some(was), None) => out.push(
            Rule::GuardLoosened,
            format!("timeout of {} removed", millis(was)),
        ),
        (None, Some(now)) => out.push(
            Rule::GuardTightened,
            format!("timeout of {} added", millis(now)),
        ),
        (Some(was), Some(now)) if now > was => out.push(
            Rule::GuardLoosened,
            format!("timeout raised from {} to {}", millis(was), millis(now)),
        ),
        (Some(was), Some(now)) if now < was => out.push(
            Rule::GuardTightened,
            format!("timeout lowered from {} to {}", millis(was), millis(now)),
        ),
        _ => {}
    }
    rate_limit("action", old.rate_limit, new.rate_limit, out);
}

fn rate_limit(of: &str, old: Option<RateLimit>, new: Option<RateLimit>, out: &mut Changes<'_>) {
    let describe = |limit: RateLimit| format!("{} calls per {}", limit.max, millis(limit.per_ms));
    match (old, new) {
        (Some(was), None) => out.push(
            Rule::GuardLoosened,
            format!("{of} rate limit of {} removed", describe(was)),
        ),
        (None, Some(now)) => out.push(
            Rule::GuardTightened,
            format!("{of} rate limit of {} added", describe(now)),
        ),
        (Some(was), Some(now)) if was != now => {
            // Looser when the bucket holds more or refills faster (max / per, compared
            // without division).
            let faster = u128::from(now.max) * u128::from(was.per_ms)
                > u128::from(was.max) * u128::from(now.per_ms);
            let rule = if now.max > was.max || faster {
                Rule::GuardLoosened
            } else {
                Rule::GuardTightened
            };
            out.push(
                rule,
                format!("{of} rate limit {} (was {})", describe(now), describe(was)),
            );
        }
        _ => {}
    }
}

/// Calls `change(item, added)` for every item of one list and not the other, in order.
/// The OAuth scopes declared, added (a token that could use it no longer can) and removed (a
/// token with fewer scopes can), for an action, a resource or a prompt alike.
fn scope_changes(old: &[String], new: &[String], out: &mut Changes<'_>) {
    set_changes(old, new, |scope, added| {
        if added {
            out.push(Rule::ScopeAdded, format!("scope `{scope}` now required"));
        } else {
            out.push(
                Rule::ScopeRemoved,
                format!("scope `{scope}` no longer required"),
            );
        }
    });
}

fn set_changes<'v>(old: &'v [String], new: &'v [String], mut change: impl FnMut(&'v str, bool)) {
    for item in new {
        if !old.contains(item) {
            change(item, true);
        }
    }
    for item in old {
        if !new.contains(item) {
            change(item, false);
        }
    }
}

pub(crate) fn millis(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// `reworded: "old…" → "new…"`, `added: "…"` or `removed`.
pub(crate) fn reworded(old: Option<&str>, new: Option<&str>) -> String {
    match (old, new) {
        (Some(old), Some(new)) => format!("reworded: {} → {}", quote(old), quote(new)),
        (None, Some(new)) => format!("added: {}", quote(new)),
        (Some(_), None) => "removed".into(),
        (None, None) => "unchanged".into(),
    }
}

/// A text as a JSON string (newlines escaped, so that a reason stays on one line), cut to 60
/// characters.
pub(crate) fn quote(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        None => Value::String(text.to_owned()).to_string(),
        Some((cut, _)) => {
            let quoted = Value::String(text[..cut].to_owned()).to_string();
            format!("{}…\"", &quoted[..quoted.len() - 1])
        }
    }
}

/// Resources and prompts: added, removed, and what a client or agent meets of each.
fn content(old: &Surface, new: &Surface, changes: &mut Vec<Change>) {
    for (key, was) in &old.resources {
        let mut out = Changes::new(key, changes);
        let Some(now) = new.resources.get(key) else {
            out.push(
                Rule::ResourceRemoved,
                format!("removed: reading `{}` fails", was.uri),
            );
            continue;
        };
        if was.uri != now.uri {
            out.push(
                Rule::ResourceRemoved,
                format!("now read at `{}`: reading `{}` fails", now.uri, was.uri),
            );
        }
        if was.mime_type != now.mime_type {
            out.push(
                Rule::ResourceMimeChanged,
                format!("contents are `{}`, not `{}`", now.mime_type, was.mime_type),
            );
        }
        if was.input_schema != now.input_schema {
            out.push(
                Rule::ResourceRemoved,
                "its template's variables are read otherwise: URIs that worked may not".into(),
            );
        }
        // A presenter's change is told as it is for the tools that present with it (and
        // grouped with theirs); anything else a read shows, in one line.
        let before = out.count();
        content_presenters(&was.egress, &now.egress, &mut out);
        if out.count() == before
            && (was.output_schema != now.output_schema || was.egress != now.egress)
        {
            out.push(
                Rule::ContentEgressChanged,
                "what a read shows changed (data schema, presenter fields, labels or rules)".into(),
            );
        }
        match (was.cache, now.cache) {
            (was_cache, now_cache) if was_cache == now_cache => {}
            (_, Some(Cache::Immutable)) => out.push(
                Rule::CacheImmutable,
                "declared `immutable`: clients may reuse a read for a day".into(),
            ),
            _ => out.push(Rule::CacheChanged, "its cache hint changed".into()),
        }
        not_guarded(&was.not_guarded, &now.not_guarded, &mut out);
        scope_changes(&was.scopes, &now.scopes, &mut out);
        if was.toolset != now.toolset {
            out.push(Rule::ToolsetChanged, "its toolset changed".into());
        }
        if was.title != now.title {
            out.push(Rule::TitleChanged, "its title changed".into());
        }
        if was.description != now.description {
            out.push(
                Rule::DescriptionChanged,
                reworded(Some(&was.description), Some(&now.description)),
            );
        }
        out.form_only(was, now);
    }
    for (key, now) in &new.resources {
        if !old.resources.contains_key(key) {
            Changes::new(key, changes)
                .push(Rule::ResourceAdded, format!("new resource `{}`", now.uri));
        }
    }
    for (key, was) in &old.prompts {
        let mut out = Changes::new(key, changes);
        let Some(now) = new.prompts.get(key).filter(|now| now.name == was.name) else {
            out.push(
                Rule::PromptRemoved,
                format!("removed: getting `{}` fails", was.name),
            );
            continue;
        };
        for (name, argument) in &was.arguments {
            match now.arguments.get(name) {
                None => out.push(
                    Rule::PromptArgumentBroken,
                    format!("argument `{name}` removed: clients that send it are refused"),
                ),
                Some(then) if then.required && !argument.required => out.push(
                    Rule::PromptArgumentBroken,
                    format!("argument `{name}` is now required"),
                ),
                Some(then) if !then.required && argument.required => out.push(
                    Rule::PromptArgumentRelaxed,
                    format!("argument `{name}` is now optional"),
                ),
                Some(then) if then.description != argument.description => out.push(
                    Rule::DescriptionChanged,
                    reworded(argument.description.as_deref(), then.description.as_deref()),
                ),
                Some(_) => {}
            }
        }
        for (name, argument) in &now.arguments {
            if !was.arguments.contains_key(name) {
                if argument.required {
                    out.push(
                        Rule::PromptArgumentBroken,
                        format!(
                            "new required argument `{name}`: clients that leave it out are refused"
                        ),
                    );
                } else {
                    out.push(
                        Rule::PromptArgumentRelaxed,
                        format!("new optional argument `{name}`"),
                    );
                }
            }
        }
        let before = out.count();
        prompt_presenters(&was.presenters, &now.presenters, &mut out);
        if out.count() == before && was.presenters != now.presenters {
            out.push(
                Rule::ContentEgressChanged,
                "the presented data it carries changed (presenters, fields, labels or rules)"
                    .into(),
            );
        }
        not_guarded(&was.not_guarded, &now.not_guarded, &mut out);
        scope_changes(&was.scopes, &now.scopes, &mut out);
        if was.toolset != now.toolset {
            out.push(Rule::ToolsetChanged, "its toolset changed".into());
        }
        if was.title != now.title {
            out.push(Rule::TitleChanged, "its title changed".into());
        }
        if was.description != now.description {
            out.push(
                Rule::DescriptionChanged,
                reworded(Some(&was.description), Some(&now.description)),
            );
        }
        out.form_only(was, now);
    }
    for (key, now) in &new.prompts {
        if old.prompts.get(key).is_none_or(|was| was.name != now.name) {
            Changes::new(key, changes)
                .push(Rule::PromptAdded, format!("new prompt `{}`", now.name));
        }
    }
}

/// A resource's presenters, compared from its result's presenter down as a tool's are.
fn content_presenters(old: &Egress, new: &Egress, out: &mut Changes<'_>) {
    let (Some(was), Some(now)) = (&old.presenter, &new.presenter) else {
        return;
    };
    let mut covered = Covered::default();
    Walk {
        old: &old.presenters,
        new: &new.presenters,
        visited: BTreeSet::new(),
        covered: &mut covered,
        out,
    }
    .presenter("data", was, now);
}

/// A prompt's presenters, each compared with the one of the same name.
fn prompt_presenters(
    old: &BTreeMap<String, PresenterEntry>,
    new: &BTreeMap<String, PresenterEntry>,
    out: &mut Changes<'_>,
) {
    let mut covered = Covered::default();
    let mut walk = Walk {
        old,
        new,
        visited: BTreeSet::new(),
        covered: &mut covered,
        out,
    };
    for name in old.keys().filter(|name| new.contains_key(*name)) {
        walk.presenter(name, name, name);
    }
}
