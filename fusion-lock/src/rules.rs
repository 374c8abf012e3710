//! The classification: every kind of change the diff knows, with its class. The table in the
//! documentation is [`Rule::table`], and a test checks that they agree.

use std::fmt;
use std::str::FromStr;

/// How much a change matters to the agents and clients of a connector, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Wording only: titles, descriptions, labels, instructions, versions.
    Cosmetic,
    /// Compatible: every call that worked still works, and nothing more leaves.
    Safe,
    /// Compatible, but what leaves or what guards it changed: review it.
    Risky,
    /// A call that worked may now fail, or an agent may misread a result.
    Breaking,
}

impl Class {
    /// Every class, from least to most.
    pub const ALL: [Class; 4] = [Class::Cosmetic, Class::Safe, Class::Risky, Class::Breaking];

    /// `cosmetic`, `safe`, `risky` or `breaking`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Cosmetic => "cosmetic",
            Class::Safe => "safe",
            Class::Risky => "risky",
            Class::Breaking => "breaking",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Class {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Class::ALL
            .into_iter()
            .find(|class| class.as_str() == text)
            .ok_or_else(|| {
                format!("unknown class `{text}`: expected breaking, risky, safe or cosmetic")
            })
    }
}

macro_rules! rules {
    ($($(#[doc = $doc:literal])* $rule:ident = $id:literal, $class:ident, $what:literal;)*) => {
        /// A kind of change, with its class. Every change the diff reports is one of these.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Rule {
            $($(#[doc = $doc])* $rule,)*
        }

        impl Rule {
            /// Every rule, by class (breaking first), in the order of the documentation's table.
            pub const ALL: &'static [Rule] = &[$(Rule::$rule,)*];

            /// The class of every change of this kind.
            pub fn class(self) -> Class {
                match self {
                    $(Rule::$rule => Class::$class,)*
                }
            }

            /// A stable identifier, such as `destructive-flipped`.
            pub fn id(self) -> &'static str {
                match self {
                    $(Rule::$rule => $id,)*
                }
            }

            /// What the change is, as the documentation's table says it.
            pub fn what(self) -> &'static str {
                match self {
                    $(Rule::$rule => $what,)*
                }
            }
        }
    };
}

rules! {
    /// An action is gone.
    ActionRemoved = "action-removed", Breaking, "a tool or action removed";
    /// An action is served under another key, otherwise the same.
    ActionRenamed = "action-renamed", Breaking, "a tool or action renamed (the same entry under another key)";
    /// The tool or discriminator an agent calls changed.
    ExposureChanged = "exposure-changed", Breaking, "the name an agent calls an action by changed (its tool or `action` discriminator)";
    /// Flat became grouped or back.
    ExpositionChanged = "exposition-changed", Breaking, "the server's exposition changed (flat or grouped)";
    /// A new argument that must be sent.
    RequiredArgumentAdded = "required-argument-added", Breaking, "a new required argument";
    /// An argument is no longer accepted.
    ArgumentRemoved = "argument-removed", Breaking, "an argument removed (sending it is now refused)";
    /// An optional argument must now be sent.
    ArgumentNowRequired = "argument-now-required", Breaking, "an optional argument became required";
    /// An argument accepts fewer types.
    InputTypeNarrowed = "input-type-narrowed", Breaking, "an argument's type narrowed (a type, `null` or a variant no longer accepted)";
    /// An enum value an argument accepted is gone.
    InputEnumValueRemoved = "input-enum-value-removed", Breaking, "an enum value removed from an argument";
    /// An argument's constraint refuses values it accepted.
    InputConstraintTightened = "input-constraint-tightened", Breaking, "an argument's constraint added or tightened (a minimum raised, a maximum lowered, a pattern or format added or changed)";
    /// Unknown arguments are now refused.
    InputClosed = "input-closed", Breaking, "an object argument no longer accepts other properties";
    /// A read became a write.
    QueryBecameWrite = "query-became-write", Breaking, "a query became a mutation or an action";
    /// `readOnlyHint` flipped.
    ReadOnlyFlipped = "read-only-flipped", Breaking, "`readOnly` flipped";
    /// `destructiveHint` flipped.
    DestructiveFlipped = "destructive-flipped", Breaking, "`destructive` flipped";
    /// An output field is gone.
    OutputFieldRemoved = "output-field-removed", Breaking, "an output field removed (from a presenter or a plain result)";
    /// An output field has another type.
    OutputTypeChanged = "output-type-changed", Breaking, "an output field's type changed (other than only narrowed)";
    /// An output field may be absent.
    OutputFieldOptional = "output-field-optional", Breaking, "an output field is no longer always present";
    /// A resource is gone or is read at another URI.
    ResourceRemoved = "resource-removed", Breaking, "a resource removed, or its URI or URI template changed";
    /// A resource's contents come as another MIME type.
    ResourceMimeChanged = "resource-mime-changed", Breaking, "a resource's MIME type changed";
    /// A prompt is gone or is asked for under another name.
    PromptRemoved = "prompt-removed", Breaking, "a prompt removed or renamed";
    /// A prompt's argument must now be given, or is gone.
    PromptArgumentBroken = "prompt-argument-broken", Breaking, "a prompt argument added as required, made required, or removed";
    /// The tool runs only as a task.
    TaskRequired = "task-required", Breaking, "a tool now runs only as a task (a client without the tasks extension is refused)";
    /// Calling needs a scope it did not.
    ScopeAdded = "scope-added", Breaking, "a required OAuth scope added (tokens that could call it no longer can)";

    /// A presenter lets one more field out.
    PresenterFieldAdded = "presenter-field-added", Risky, "egress widened: a field added to a presenter";
    /// A plain result has one more field.
    OutputFieldAdded = "output-field-added", Risky, "egress widened: a field added to a plain result";
    /// An output object may carry properties it does not list.
    OutputOpened = "output-opened", Risky, "egress widened: an output object may carry other properties";
    /// An output field may take a value it did not.
    OutputEnumValueAdded = "output-enum-value-added", Risky, "an enum value added to an output field";
    /// A presenter's rules changed.
    RulesChanged = "rules-changed", Risky, "a presenter's rules changed (a rule added, removed or reworded)";
    /// More items reach the agent.
    LimitRaised = "limit-raised", Risky, "an agent limit raised or removed";
    /// More bytes reach the agent.
    BudgetRaised = "budget-raised", Risky, "an egress budget (bytes or tokens) raised or removed";
    /// A guard is gone or lets more through.
    GuardLoosened = "guard-loosened", Risky, "a guard removed or loosened (serialization, concurrency, timeout, rate limit, access policy, audit)";
    /// Fewer domains are invalidated.
    InvalidationRemoved = "invalidation-removed", Risky, "an invalidation removed";
    /// A result is declared never to change.
    CacheImmutable = "cache-immutable", Risky, "a query declared `immutable` (agents may reuse its result for ever)";
    /// The verb changed, not from a query.
    VerbChanged = "verb-changed", Risky, "the verb changed between mutation, action and query (other than from a query)";
    /// Retrying is no longer declared safe.
    IdempotencyDropped = "idempotency-dropped", Risky, "`idempotent` dropped (retrying is no longer declared safe)";
    /// `openWorldHint` flipped.
    OpenWorldChanged = "open-world-changed", Risky, "`openWorld` flipped";
    /// The toolset changed.
    ToolsetChanged = "toolset-changed", Risky, "an action moved to another toolset, or into or out of one";
    /// Calling needs fewer scopes: a token can do more than it could.
    ScopeRemoved = "scope-removed", Risky, "a required OAuth scope removed (a token with fewer scopes can call it)";
    /// A tag changed.
    TagsChanged = "tags-changed", Risky, "a tag added or removed (access policies may read tags)";
    /// The presenter may render a kind of UI block it did not.
    UiKindAdded = "ui-kind-added", Risky, "egress widened: a presenter may render a kind of UI block it did not (or UI blocks at all)";
    /// The agent may be pointed at another tool.
    SuggestionAdded = "suggestion-added", Risky, "a presenter or an error may point the agent to another tool";
    /// The server has another name.
    ServerRenamed = "server-renamed", Risky, "the server renamed (clients may key their configuration by it)";
    /// A new resource: more data can be read.
    ResourceAdded = "resource-added", Risky, "a new resource (more data can be read)";
    /// A new prompt.
    PromptAdded = "prompt-added", Risky, "a new prompt (it may carry presented data)";
    /// What a resource's read or a prompt shows changed.
    ContentEgressChanged = "content-egress-changed", Risky, "what a resource or prompt shows changed (its data schema, its presenters' fields, labels or rules)";
    /// Another schema keyword changed.
    SchemaKeywordChanged = "schema-keyword-changed", Risky, "any other change of a schema (a `default`, an output constraint, …)";
    /// The tool now asks the user while it runs.
    AsksUserAdded = "asks-user-added", Risky, "a tool now asks the user while it runs (elicitation; a client that cannot ask gets an error)";
    /// The tool may run as a task.
    TaskOffered = "task-offered", Risky, "a tool now runs as a task for a client with the tasks extension (it gets a task id, not the result)";
    /// An input named like a guarded field is stated not to be it.
    NotGuardedStated = "not-guarded-stated", Risky, "an input named like a guarded field stated not to be that field, or the reason changed (read the reason)";
    /// A tool's definition costs more tokens than the budget allows.
    TokensGrew = "tokens-grew", Risky, "a tool's definition or worst answer grew past the lockfile's token threshold, or an answer lost its bound (every conversation or call pays for it)";

    /// A new action.
    ActionAdded = "action-added", Safe, "a new tool or action";
    /// A prompt's argument may be left out, or a new one may.
    PromptArgumentRelaxed = "prompt-argument-relaxed", Safe, "a prompt argument added as optional, or made optional";
    /// A new argument that may be left out.
    OptionalArgumentAdded = "optional-argument-added", Safe, "a new optional argument";
    /// A required argument may be left out.
    ArgumentNowOptional = "argument-now-optional", Safe, "a required argument became optional";
    /// An argument accepts more types.
    InputTypeWidened = "input-type-widened", Safe, "an argument's type widened (a type, `null` or a variant accepted)";
    /// An argument accepts one more enum value.
    InputEnumValueAdded = "input-enum-value-added", Safe, "an enum value added on input";
    /// An argument's constraint accepts more.
    InputConstraintLoosened = "input-constraint-loosened", Safe, "an argument's constraint removed or loosened";
    /// An object argument accepts other properties.
    InputOpened = "input-opened", Safe, "an object argument accepts other properties";
    /// An output field takes fewer values or is always present.
    OutputNarrowed = "output-narrowed", Safe, "an output field narrowed (never `null`, an enum value gone, always present)";
    /// Fewer items reach the agent.
    LimitLowered = "limit-lowered", Safe, "an agent limit lowered or added";
    /// Fewer bytes reach the agent.
    BudgetLowered = "budget-lowered", Safe, "an egress budget (bytes or tokens) lowered or added";
    /// A guard is new or stricter.
    GuardTightened = "guard-tightened", Safe, "a guard added or tightened, or its retry hint changed";
    /// More domains are invalidated.
    InvalidationAdded = "invalidation-added", Safe, "an invalidation added";
    /// The cache hint changed, not to `immutable`.
    CacheChanged = "cache-changed", Safe, "a cache hint changed or removed (other than to `immutable`)";
    /// Retrying is declared safe.
    IdempotencyAdded = "idempotency-added", Safe, "`idempotent` declared";
    /// The presenter no longer renders a kind of UI block.
    UiKindRemoved = "ui-kind-removed", Safe, "a presenter no longer renders a kind of UI block (or no UI blocks at all)";
    /// The agent is pointed at one tool less.
    SuggestionRemoved = "suggestion-removed", Safe, "a presenter or an error no longer points to a tool";
    /// The tool no longer asks the user.
    AsksUserRemoved = "asks-user-removed", Safe, "a tool no longer asks the user while it runs";
    /// The tool no longer runs as a task, or no longer only as one.
    TaskRelaxed = "task-relaxed", Safe, "a tool no longer runs as a task, or no longer only as one";
    /// A statement that an input is not a guarded field is gone.
    NotGuardedWithdrawn = "not-guarded-withdrawn", Safe, "a statement that an input is not a guarded field withdrawn";
    /// A token budget is recorded, or its threshold changed.
    TokenBudgetSet = "token-budget-set", Safe, "a token budget recorded, or its threshold or tokenizer changed";

    /// A title changed.
    TitleChanged = "title-changed", Cosmetic, "a title changed";
    /// A description changed.
    DescriptionChanged = "description-changed", Cosmetic, "a description changed (of an action, an argument or an output field)";
    /// A label's wording changed.
    LabelChanged = "label-changed", Cosmetic, "a presented field's label reworded";
    /// The server's instructions changed.
    InstructionsChanged = "instructions-changed", Cosmetic, "the server's instructions reworded";
    /// A version changed.
    VersionChanged = "version-changed", Cosmetic, "a version changed (of the server or an action)";
    /// A presenter or model has another name.
    PresenterRenamed = "presenter-renamed", Cosmetic, "a presenter or its model renamed (its fields are compared as they are)";
    /// A tool's definition tokens changed within the threshold.
    TokensChanged = "tokens-changed", Cosmetic, "a tool's definition or worst answer shrank, grew within the threshold, or became bounded";
    /// The same meaning, written otherwise.
    FormOnly = "form-only", Cosmetic, "the same meaning written otherwise (an order that does not matter, a definition's name)";
}

impl Rule {
    /// The documentation's table: one row per rule (class, change, identifier), by class, as
    /// Markdown.
    pub fn table() -> String {
        let mut table = String::from("| class | change | rule |\n|---|---|---|\n");
        for rule in Rule::ALL {
            table.push_str(&format!(
                "| {} | {} | `{}` |\n",
                rule.class(),
                rule.what(),
                rule.id()
            ));
        }
        table
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_listed_by_class_most_serious_first() {
        let classes: Vec<Class> = Rule::ALL.iter().map(|rule| rule.class()).collect();
        let mut sorted = classes.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(classes, sorted);
    }

    #[test]
    fn ids_are_unique_and_classes_read_back() {
        let mut ids: Vec<&str> = Rule::ALL.iter().map(|rule| rule.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Rule::ALL.len());
        for class in Class::ALL {
            assert_eq!(class.as_str().parse::<Class>(), Ok(class));
        }
        assert!("severe".parse::<Class>().is_err());
    }
}
