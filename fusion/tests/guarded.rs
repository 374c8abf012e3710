//! A guarded field's name is refused on every surface a value comes in through, under any
//! spelling, whether or not a profile of its model sits in the same tool: tool arguments at any
//! depth, resource template variables, prompt arguments and completion arguments fail the
//! server's build (`BuildError::guarded_inputs` names each); an author's explicit statement
//! that an input is not the field is accepted and recorded in the lockfile.

// The parameter structs exist for their schemas: their fields are never read.
#![allow(dead_code)]

use fusion::complete::CompletionRequest;
use fusion::{
    BuildError, CallContext, Create, GuardedInput, InputSurface, PromptMessages, ServerBuilder,
    ToolError, model, presenter, prompt, resource, tool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[model(fillable(create = [name]))]
struct Contact {
    #[cast("Contact name")]
    name: String,
    #[cast("The user who owns the contact")]
    #[guarded]
    owner_id: String,
}

#[presenter(Contact, fields(name))]
struct ContactView;

/// A model no profile or presenter of the server names: known only when registered.
#[model]
struct Ledger {
    #[cast("Ledger id")]
    id: String,
    #[cast("Who may post")]
    #[guarded]
    posting_key: String,
}

/// Shows a contact (makes `Contact` known through its presenter).
#[tool(query, name = "crm.contact", returns = ContactView)]
async fn contact(id: String) -> Result<Contact, ToolError> {
    Ok(Contact {
        name: id,
        owner_id: "u-1".into(),
    })
}

/// Transfers a contact: `owner_id` at the top level, no profile of `Contact` in this tool.
#[tool(mutation, name = "crm.transfer")]
async fn transfer(id: String, owner_id: String) -> Result<bool, ToolError> {
    let _ = (id, owner_id);
    Ok(true)
}

#[derive(Deserialize, JsonSchema)]
struct Opts {
    notify: bool,
    routing: Routing,
}

#[derive(Deserialize, JsonSchema)]
struct Routing {
    owner_id: String,
}

/// Moves a contact: `owner_id` two structs deep.
#[tool(mutation, name = "crm.move")]
async fn move_contact(id: String, opts: Opts) -> Result<bool, ToolError> {
    let _ = (id, opts);
    Ok(true)
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Extra {
    owner_id: String,
}

/// Creates a contact: a camelCase `ownerId` beside the profile.
#[tool(mutation, name = "crm.create")]
async fn create(contact: Create<Contact>, extra: Extra) -> Result<bool, ToolError> {
    let _ = (contact, extra);
    Ok(true)
}

#[derive(Deserialize, JsonSchema)]
struct Renamed {
    #[serde(rename = "OWNER-ID")]
    owner: String,
    tags: Vec<Tagged>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "PascalCase")]
struct Tagged {
    owner_id: Option<String>,
}

/// Labels a contact: renamed and PascalCase spellings, one inside a list.
#[tool(action, name = "crm.label")]
async fn label(renamed: Renamed) -> Result<bool, ToolError> {
    let _ = renamed;
    Ok(true)
}

/// The contacts of one owner: `owner_id` is a URI template variable.
#[resource(uri = "crm://owners/{owner_id}/contact", name = "crm.owner_contact")]
async fn owner_contact(owner_id: String) -> Result<String, ToolError> {
    Ok(owner_id)
}

/// Reviews the contacts of an owner: `owner_id` is a prompt argument.
#[prompt(name = "crm.review")]
async fn review(owner_id: Option<String>) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!("Review {owner_id:?}.")))
}

async fn owners(_: CallContext, _: CompletionRequest) -> Result<Vec<String>, ToolError> {
    Ok(vec!["u-1".into()])
}

/// Summarizes a contact, completing the owner's id.
#[prompt(name = "crm.summary", complete(ownerId = owners))]
#[allow(non_snake_case)]
async fn summary(ownerId: String) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!("Summarize {ownerId}.")))
}

/// Posts to a ledger: `posting_key` is guarded in a model only `.model::<Ledger>()` names.
#[tool(mutation, name = "ledger.post")]
async fn post(id: String, posting_key: String) -> Result<bool, ToolError> {
    let _ = (id, posting_key);
    Ok(true)
}

fn refused(builder: ServerBuilder) -> BuildError {
    builder
        .build()
        .expect_err("a guarded name on an input surface fails the build")
}

/// The one input refused, as `(surface, owner, path, model.field)`.
fn only(error: &BuildError) -> (InputSurface, String, String, String) {
    let inputs = error.guarded_inputs();
    assert_eq!(inputs.len(), 1, "{error}");
    described(&inputs[0])
}

fn described(input: &GuardedInput) -> (InputSurface, String, String, String) {
    (
        input.surface,
        input.owner.clone(),
        input.path.clone(),
        format!("{}.{}", input.model, input.field),
    )
}

fn base() -> ServerBuilder {
    ServerBuilder::new("crm", "1.0.0").tool::<contact>()
}

#[test]
fn a_top_level_argument_without_a_profile_of_its_model_is_refused() {
    let error = refused(base().tool::<transfer>());
    assert_eq!(
        only(&error),
        (
            InputSurface::ToolArgument,
            "crm.transfer".into(),
            "owner_id".into(),
            "Contact.owner_id".into()
        )
    );
    // The problem says where, what, and how to state the exception.
    let problem = &error.problems()[0];
    for part in [
        "tool argument `owner_id` of tool `crm.transfer`",
        "`Contact.owner_id`, a guarded field",
        "#[not_guarded(\"why\")]",
    ] {
        assert!(problem.contains(part), "{problem}");
    }
    // Without any model that guards `owner_id`, the same tool is fine.
    ServerBuilder::new("crm", "1.0.0")
        .tool::<transfer>()
        .build()
        .expect("no model guards `owner_id`");
}

#[test]
fn an_argument_nested_in_a_parameter_struct_is_refused() {
    let error = refused(base().tool::<move_contact>());
    assert_eq!(
        only(&error),
        (
            InputSurface::ToolArgument,
            "crm.move".into(),
            "opts.routing.owner_id".into(),
            "Contact.owner_id".into()
        )
    );
}

#[test]
fn camel_case_renamed_and_pascal_case_spellings_are_refused() {
    // Beside a profile of the model, camelCase: the tool's own profile makes `Contact` known.
    let error = refused(ServerBuilder::new("crm", "1.0.0").tool::<create>());
    assert_eq!(
        only(&error),
        (
            InputSurface::ToolArgument,
            "crm.create".into(),
            "extra.ownerId".into(),
            "Contact.owner_id".into()
        )
    );
    let error = refused(base().tool::<label>());
    let mut paths: Vec<String> = error
        .guarded_inputs()
        .iter()
        .map(|input| input.path.clone())
        .collect();
    paths.sort();
    assert_eq!(paths, ["renamed.OWNER-ID", "renamed.tags[].OwnerId"]);
}

#[test]
fn a_guarded_field_of_a_registered_model_is_refused() {
    // `Ledger` is behind no profile nor presenter: unknown, the argument passes...
    ServerBuilder::new("ledger", "1.0.0")
        .tool::<post>()
        .build()
        .expect("an unknown model guards nothing");
    // ...registered, it is refused.
    let error = refused(
        ServerBuilder::new("ledger", "1.0.0")
            .model::<Ledger>()
            .tool::<post>(),
    );
    assert_eq!(
        only(&error),
        (
            InputSurface::ToolArgument,
            "ledger.post".into(),
            "posting_key".into(),
            "Ledger.posting_key".into()
        )
    );
}

#[test]
fn a_resource_template_variable_is_refused() {
    let error = refused(base().resource::<owner_contact>());
    assert_eq!(
        only(&error),
        (
            InputSurface::ResourceVariable,
            "crm.owner_contact".into(),
            "owner_id".into(),
            "Contact.owner_id".into()
        )
    );
}

#[test]
fn a_prompt_argument_is_refused() {
    let error = refused(base().prompt::<review>());
    assert_eq!(
        only(&error),
        (
            InputSurface::PromptArgument,
            "crm.review".into(),
            "owner_id".into(),
            "Contact.owner_id".into()
        )
    );
}

#[test]
fn a_completion_argument_is_refused() {
    let error = refused(base().prompt::<summary>());
    let inputs: Vec<_> = error.guarded_inputs().iter().map(described).collect();
    assert!(
        inputs.contains(&(
            InputSurface::CompletionArgument,
            "crm.summary".into(),
            "ownerId".into(),
            "Contact.owner_id".into()
        )),
        "{inputs:?}"
    );
    // A completion declared without the macros, on a resource variable, is refused too.
    let spec = fusion::ResourceSpec::new("crm.owner", "crm://owner/{Owner_Id}", "An owner.")
        .with_completion("Owner_Id", owners)
        .handler(
            |_: CallContext, args: OwnerVariable| async move { Ok::<_, ToolError>(args.Owner_Id) },
        );
    let error = refused(base().resource_spec(spec));
    let surfaces: Vec<InputSurface> = error
        .guarded_inputs()
        .iter()
        .map(|input| input.surface)
        .collect();
    assert_eq!(
        surfaces,
        [
            InputSurface::ResourceVariable,
            InputSurface::CompletionArgument
        ]
    );
}

#[derive(Deserialize, JsonSchema)]
#[allow(non_snake_case)]
struct OwnerVariable {
    Owner_Id: String,
}

// ---------------------------------------------------------------------------------------------
// Names no schema shows: serde aliases and untyped values, refused when they come

#[derive(Deserialize, JsonSchema)]
struct Aliased {
    /// A free note; serde also reads it under an alias no schema shows.
    #[serde(alias = "owner_id")]
    note: String,
}

/// Annotates a contact: its struct reads `owner_id` as an alias, its `data` is untyped.
#[tool(action, name = "crm.annotate")]
async fn annotate(
    id: String,
    annotation: Aliased,
    data: Option<fusion::serde_json::Value>,
) -> Result<String, ToolError> {
    let _ = (id, data);
    Ok(annotation.note)
}

#[tokio::test]
async fn an_alias_or_an_untyped_value_cannot_carry_a_guarded_name() {
    let server = base()
        .tool::<annotate>()
        .build()
        .expect("no schema shows the alias");
    let tester = fusion::testing::Tester::new(server);
    let fine = tester
        .call(
            "crm.annotate",
            json!({"id": "C-1", "annotation": {"note": "hi"}}),
        )
        .await;
    assert_eq!(fine.error_code(), None, "{}", fine.raw_text());
    for (arguments, path) in [
        (
            json!({"id": "C-1", "annotation": {"owner_id": "u-9"}}),
            "annotation.owner_id",
        ),
        (
            json!({"id": "C-1", "annotation": {"note": "hi"}, "data": [{"ownerId": "u-9"}]}),
            "data[0].ownerId",
        ),
    ] {
        let result = tester.call("crm.annotate", arguments).await;
        assert_eq!(
            result.error_code(),
            Some("VALIDATION_ERROR"),
            "{}",
            result.raw_text()
        );
        let issue = &result.error()["details"]["issues"][0];
        assert_eq!(issue["field"], path);
        assert_eq!(issue["problem"], "unknown field");
        assert!(!result.raw_text().contains("u-9"), "{}", result.raw_text());
    }
}

// ---------------------------------------------------------------------------------------------
// The explicit exception

/// Transfers a contact to a new owner, checked by the handler against the caller's rights.
#[tool(mutation, name = "crm.reassign")]
async fn reassign(
    id: String,
    #[not_guarded("the new owner to transfer to; the handler checks the caller may")]
    owner_id: String,
    filter: OwnerFilter,
) -> Result<bool, ToolError> {
    let _ = (id, owner_id, filter);
    Ok(true)
}

#[derive(Deserialize, JsonSchema)]
struct OwnerFilter {
    /// Only contacts of this owner.
    #[serde(rename = "ownerId")]
    #[schemars(extend("x-fusion-not-guarded" = "a filter on listed contacts, never stored"))]
    owner: Option<String>,
}

/// The contacts of one owner, by the owner's id (public in this CRM).
#[resource(uri = "crm://by-owner/{owner_id}", name = "crm.by_owner")]
async fn by_owner(
    #[not_guarded("a public owner id that selects what to read; nothing is written")]
    owner_id: String,
) -> Result<String, ToolError> {
    Ok(owner_id)
}

/// Drafts a note to an owner.
#[prompt(name = "crm.note", complete(owner_id = owners))]
async fn note(
    #[not_guarded("whom the note is addressed to; the prompt only writes text")] owner_id: String,
) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!("Write to {owner_id}.")))
}

fn stated() -> ServerBuilder {
    base()
        .tool::<reassign>()
        .resource::<by_owner>()
        .prompt::<note>()
}

#[test]
fn a_stated_exception_is_accepted_recorded_in_the_lockfile_and_not_served() {
    let server = stated().build().expect("every guarded name is stated");
    let surface = fusion::lock::surface(&server);
    let reasons = |entries: &std::collections::BTreeMap<String, String>| {
        entries
            .iter()
            .map(|(path, reason)| format!("{path}: {reason}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        reasons(&surface.actions["crm.reassign"].not_guarded),
        [
            "filter.ownerId: a filter on listed contacts, never stored",
            "owner_id: the new owner to transfer to; the handler checks the caller may",
        ]
    );
    assert_eq!(
        reasons(&surface.resources["crm.by_owner"].not_guarded),
        ["owner_id: a public owner id that selects what to read; nothing is written"]
    );
    assert_eq!(
        reasons(&surface.prompts["crm.note"].not_guarded),
        ["owner_id: whom the note is addressed to; the prompt only writes text"]
    );
    // Written in `fusion.lock`, where a reviewer reads it; nothing else carries it.
    let lockfile = surface.to_lockfile();
    assert!(lockfile.contains("\"not_guarded\""), "{lockfile}");
    assert!(!lockfile.contains("x-fusion-not-guarded"), "{lockfile}");
    let listed = server
        .tools()
        .find(|tool| tool.name() == "crm_reassign")
        .expect("served");
    let schema = serde_json::to_string(&listed.definition().input_schema).unwrap();
    assert!(!schema.contains("x-fusion-not-guarded"), "{schema}");
    assert!(schema.contains("ownerId"), "{schema}");
    // An entry without statements writes none.
    assert!(surface.actions["crm.contact"].not_guarded.is_empty());
}

#[test]
fn a_new_statement_is_a_risky_change_for_the_reviewer() {
    let before = fusion::lock::surface(&base().build().unwrap());
    let after = fusion::lock::surface(&base().tool::<reassign>().build().unwrap());
    let mut with_statement = after.clone();
    let diff = fusion::lock::diff(&before, &after);
    assert!(
        diff.changes()
            .iter()
            .any(|change| change.rule == fusion::lock::Rule::ActionAdded),
        "{diff:?}"
    );
    // The same tool, its reason reworded: flagged on its own.
    with_statement
        .actions
        .get_mut("crm.reassign")
        .unwrap()
        .not_guarded
        .insert("owner_id".into(), "reworded".into());
    let diff = fusion::lock::diff(&after, &with_statement);
    let rules: Vec<_> = diff.changes().iter().map(|change| change.rule).collect();
    assert_eq!(rules, [fusion::lock::Rule::NotGuardedStated], "{diff:?}");
    assert_eq!(diff.changes()[0].class(), fusion::lock::Class::Risky);
    // Withdrawn: the reviewer sees it go.
    let mut withdrawn = after.clone();
    withdrawn
        .actions
        .get_mut("crm.reassign")
        .unwrap()
        .not_guarded
        .remove("owner_id");
    let diff = fusion::lock::diff(&after, &withdrawn);
    let rules: Vec<_> = diff.changes().iter().map(|change| change.rule).collect();
    assert_eq!(rules, [fusion::lock::Rule::NotGuardedWithdrawn], "{diff:?}");
}

#[test]
fn a_statement_on_something_that_is_not_a_plain_argument_is_refused() {
    let mut params = fusion::Params::new();
    params.group::<Create<Contact>>();
    params.not_guarded("owner_id", "there is no such argument");
    let error = params.compile("crm.bad").expect_err("refused");
    assert_eq!(
        error.problems(),
        [
            "`owner_id` is stated not guarded, but it is not a plain argument: state it on the \
          field of the parameter struct that carries it"
        ]
    );
}
