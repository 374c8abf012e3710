//! The suite's tools.

use std::time::Duration;

use fusion::{
    Answer, ArgumentGroup, Elicit, Log, Media, Progress, Roots, Sample, ServerBuilder, ToolError,
    WithMedia, tool,
};

pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool::<test_simple_text>()
        .tool::<test_image_content>()
        .tool::<test_audio_content>()
        .tool::<test_embedded_resource>()
        .tool::<test_multiple_content_types>()
        .tool::<test_error_handling>()
        .tool::<test_tool_with_progress>()
        .tool::<test_tool_with_logging>()
        .tool::<test_logging_tool>()
        .tool::<test_elicitation>()
        .tool::<test_elicitation_sep1034_defaults>()
        .tool::<test_elicitation_sep1330_enums>()
        .tool::<test_sampling>()
        .tool::<test_missing_capability>()
        .tool::<test_streaming_elicitation>()
        .tool::<test_input_required_result_elicitation>()
        .tool::<test_input_required_result_sampling>()
        .tool::<test_input_required_result_list_roots>()
        .tool::<test_input_required_result_request_state>()
        .tool::<test_input_required_result_multiple_inputs>()
        .tool::<test_input_required_result_multi_round>()
        .tool::<test_input_required_result_tampered_state>()
        .tool::<test_input_required_result_capabilities>()
        .tool::<json_schema_2020_12_tool>()
        .tool::<test_custom_headers>()
}

/// Tests simple text content response.
#[tool(query, name = "test_simple_text")]
async fn test_simple_text() -> Result<String, ToolError> {
    Ok("This is a simple text response for testing.".to_owned())
}

/// Tests image content response.
#[tool(query, name = "test_image_content")]
async fn test_image_content() -> Result<WithMedia<&'static str>, ToolError> {
    Ok(WithMedia::new("A 1x1 red pixel.").with(Media::image(crate::PIXEL_PNG, "image/png")))
}

/// Tests audio content response.
#[tool(query, name = "test_audio_content")]
async fn test_audio_content() -> Result<WithMedia<&'static str>, ToolError> {
    Ok(WithMedia::new("A short tone.").with(Media::audio(crate::TONE_WAV, "audio/wav")))
}

/// Tests embedded resource content response.
#[tool(query, name = "test_embedded_resource")]
async fn test_embedded_resource() -> Result<WithMedia<&'static str>, ToolError> {
    Ok(
        WithMedia::new("An embedded resource follows.").with(Media::resource_text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )),
    )
}

/// Tests response with multiple content types (text, image, resource).
#[tool(query, name = "test_multiple_content_types")]
async fn test_multiple_content_types() -> Result<WithMedia<&'static str>, ToolError> {
    Ok(WithMedia::new("Multiple content types test:")
        .with(Media::image(crate::PIXEL_PNG, "image/png"))
        .with(Media::resource_text(
            "test://mixed-content-resource",
            "application/json",
            fusion::serde_json::json!({"test": "data", "value": 123}).to_string(),
        )))
}

/// Tests error response handling: always fails.
#[tool(query, name = "test_error_handling")]
async fn test_error_handling() -> Result<String, ToolError> {
    Err(ToolError::new(
        "TEST_ERROR",
        "This tool intentionally returns an error for testing",
    ))
}

/// Tests a tool that reports progress: 0, 50 and 100 of 100, 50 ms apart.
#[tool(query, name = "test_tool_with_progress")]
async fn test_tool_with_progress(progress: Progress) -> Result<String, ToolError> {
    for step in [0.0, 50.0, 100.0] {
        if step > 0.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        progress
            .report(step, Some(100.0), format!("Completed step {step} of 100"))
            .await;
    }
    Ok("Progress reported".to_owned())
}

/// Tests a tool that logs while it runs: three `info` messages, 50 ms apart.
#[tool(query, name = "test_tool_with_logging")]
async fn test_tool_with_logging(log: Log) -> Result<String, ToolError> {
    log.info("Tool execution started").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    log.info("Tool processing data").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    log.info("Tool execution completed").await;
    Ok("Tool with logging executed successfully".to_owned())
}

/// Logs one `info` message: only a client that asked for a log level receives it.
#[tool(query, name = "test_logging_tool")]
async fn test_logging_tool(log: Log) -> Result<String, ToolError> {
    log.info("Diagnostic trace logging activated").await;
    Ok("Logging evaluated".to_owned())
}

/// Who the user is, as `test_elicitation` asks.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct UserInfo {
    /// User's response
    username: String,
    /// User's email address
    email: String,
}

/// Tests server-initiated elicitation: asks the user `message`.
#[tool(action, name = "test_elicitation")]
async fn test_elicitation(
    ask: Elicit,
    /// The message to show the user.
    message: String,
) -> Result<String, ToolError> {
    Ok(match ask.ask::<UserInfo>(message).await? {
        Answer::Accepted(user) => format!(
            "User response: action=accept, content={{username: {}, email: {}}}",
            user.username, user.email
        ),
        Answer::Declined => "User response: action=decline".to_owned(),
        Answer::Cancelled => "User response: action=cancel".to_owned(),
    })
}

// ---------------------------------------------------------------------------------------------
// Elicitation with defaults and enums (SEP-1034, SEP-1330): the schema comes from the type.

fn default_name() -> String {
    "John Doe".to_owned()
}

fn default_age() -> i64 {
    30
}

fn default_score() -> f64 {
    95.5
}

fn default_verified() -> bool {
    true
}

/// A status, one of three.
#[fusion::data]
#[derive(Debug, Default)]
#[serde(rename_all = "lowercase")]
enum Status {
    #[default]
    Active,
    Inactive,
    Pending,
}

/// A form whose every field has a default.
#[fusion::data]
#[derive(Debug)]
struct Profile {
    /// User name
    #[serde(default = "default_name")]
    name: String,
    /// User age
    #[serde(default = "default_age")]
    age: i64,
    /// User score
    #[serde(default = "default_score")]
    score: f64,
    /// User status
    #[serde(default)]
    status: Status,
    /// Verification status
    #[serde(default = "default_verified")]
    verified: bool,
}

/// Tests elicitation with default values for every primitive type (SEP-1034).
#[tool(query, name = "test_elicitation_sep1034_defaults")]
async fn test_elicitation_sep1034_defaults(ask: Elicit) -> Result<String, ToolError> {
    let answer = ask
        .ask::<Profile>("Please review and update the form fields with defaults")
        .await?;
    Ok(completed(answer))
}

/// What the user answered, as the suite's fixtures word it.
fn completed<T: fusion::serde::Serialize>(answer: Answer<T>) -> String {
    match answer {
        Answer::Accepted(content) => format!(
            "Elicitation completed: action=accept, content={}",
            fusion::serde_json::to_string(&content).unwrap_or_default()
        ),
        Answer::Declined => "Elicitation completed: action=decline".to_owned(),
        Answer::Cancelled => "Elicitation completed: action=cancel".to_owned(),
    }
}

/// Options without titles.
#[fusion::data]
#[derive(Debug)]
#[serde(rename_all = "lowercase")]
enum Plain {
    Option1,
    Option2,
    Option3,
}

/// Options with titles (a `oneOf` of `const`/`title` pairs).
#[fusion::data]
#[derive(Debug)]
enum Titled {
    #[serde(rename = "value1")]
    #[schemars(title = "First Option")]
    Value1,
    #[serde(rename = "value2")]
    #[schemars(title = "Second Option")]
    Value2,
    #[serde(rename = "value3")]
    #[schemars(title = "Third Option")]
    Value3,
}

/// Options with titles the older way (`enumNames`).
#[fusion::data]
#[derive(Debug)]
#[serde(rename_all = "lowercase")]
#[schemars(extend("enumNames" = ["Option One", "Option Two", "Option Three"]))]
enum Legacy {
    Opt1,
    Opt2,
    Opt3,
}

/// Choices with titles, several of which may be picked.
#[fusion::data]
#[derive(Debug)]
enum Choice {
    #[serde(rename = "value1")]
    #[schemars(title = "First Choice")]
    Value1,
    #[serde(rename = "value2")]
    #[schemars(title = "Second Choice")]
    Value2,
    #[serde(rename = "value3")]
    #[schemars(title = "Third Choice")]
    Value3,
}

/// A form of the five kinds of enum.
#[fusion::data]
#[derive(Debug)]
#[serde(rename_all = "camelCase")]
struct Picks {
    /// Select one option
    untitled_single: Option<Plain>,
    /// Select one option with titles
    titled_single: Option<Titled>,
    /// Select one option (legacy)
    legacy_enum: Option<Legacy>,
    /// Select multiple options
    #[schemars(length(min = 1, max = 3))]
    untitled_multi: Option<Vec<Plain>>,
    /// Select multiple options with titles
    #[schemars(length(min = 1, max = 3))]
    titled_multi: Option<Vec<Choice>>,
}

/// Tests elicitation with the five kinds of enum schema (SEP-1330).
#[tool(query, name = "test_elicitation_sep1330_enums")]
async fn test_elicitation_sep1330_enums(ask: Elicit) -> Result<String, ToolError> {
    let answer = ask
        .ask::<Picks>("Please select options from the enum fields")
        .await?;
    Ok(completed(answer))
}

// ---------------------------------------------------------------------------------------------
// Sampling, and what a stateless client must have declared

/// Tests server-initiated sampling: asks the client's model `prompt`.
#[tool(query, name = "test_sampling")]
async fn test_sampling(
    sample: Sample,
    /// The prompt to send to the LLM.
    prompt: String,
) -> Result<String, ToolError> {
    let text = sample.text(prompt, 100).await?;
    Ok(format!("LLM response: {text}"))
}

/// Needs the client's model: a client that did not declare `sampling` cannot call it.
#[tool(query, name = "test_missing_capability")]
async fn test_missing_capability(sample: Sample) -> Result<String, ToolError> {
    let text = sample.text("Say hello.", 20).await?;
    Ok(format!("Success: {text}"))
}

/// Asks the user in the middle of the call: on a stateless request the question travels in
/// the result (`input_required`), never as a request of its own on the response stream.
#[tool(query, name = "test_streaming_elicitation")]
async fn test_streaming_elicitation(ask: Elicit) -> Result<String, ToolError> {
    let go_on = ask.confirm("Continue streaming?").await?;
    Ok(format!("Streaming complete (continued: {go_on})"))
}

// ---------------------------------------------------------------------------------------------
// Multi-round requests (SEP-2322): each question under the key the suite expects

/// A name, as asked.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct Name {
    name: String,
}

/// A colour, as asked.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct Colour {
    color: String,
}

/// A yes or no, as asked.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct Confirmation {
    ok: bool,
}

/// A free answer, as asked.
#[fusion::data]
#[derive(Debug)]
struct Input {
    value: String,
}

fn name_of(answer: Answer<Name>) -> String {
    match answer {
        Answer::Accepted(Name { name }) => name,
        Answer::Declined | Answer::Cancelled => "stranger".to_owned(),
    }
}

/// Asks the user's name, then greets them.
#[tool(query, name = "test_input_required_result_elicitation")]
async fn test_input_required_result_elicitation(ask: Elicit) -> Result<String, ToolError> {
    let name = name_of(ask.named("user_name").ask("What is your name?").await?);
    Ok(format!("Hello, {name}!"))
}

/// Asks the client's model a question.
#[tool(query, name = "test_input_required_result_sampling")]
async fn test_input_required_result_sampling(sample: Sample) -> Result<String, ToolError> {
    let text = sample
        .named("capital_question")
        .text("What is the capital of France?", 100)
        .await?;
    Ok(format!("Sampling result: {text}"))
}

/// Asks the client for its roots.
#[tool(query, name = "test_input_required_result_list_roots")]
async fn test_input_required_result_list_roots(roots: Roots) -> Result<String, ToolError> {
    let roots = roots.named("client_roots").list().await?;
    let uris: Vec<&str> = roots.iter().map(|root| root.uri.as_str()).collect();
    Ok(format!(
        "Found {} root(s): {}",
        roots.len(),
        uris.join(", ")
    ))
}

/// Asks for a confirmation; the answer comes back with the sealed request state.
#[tool(query, name = "test_input_required_result_request_state")]
async fn test_input_required_result_request_state(ask: Elicit) -> Result<String, ToolError> {
    let answer = ask
        .named("confirm")
        .ask::<Confirmation>("Please confirm")
        .await?;
    Ok(match answer {
        Answer::Accepted(Confirmation { ok: true }) => "state-ok: requestState validated",
        _ => "state-ok: not confirmed",
    }
    .to_owned())
}

/// Asks the user, the client's model and the client's roots at once: one round.
#[tool(query, name = "test_input_required_result_multiple_inputs")]
async fn test_input_required_result_multiple_inputs(
    ask: Elicit,
    sample: Sample,
    roots: Roots,
) -> Result<String, ToolError> {
    let (name, greeting, roots) = tokio::join!(
        ask.named("user_name").ask::<Name>("What is your name?"),
        sample.named("greeting").text("Generate a greeting", 50),
        roots.named("client_roots").list(),
    );
    let (name, greeting, roots) = (name_of(name?), greeting?, roots?);
    Ok(format!(
        "Name: {name}; Greeting: {greeting}; Roots: {}",
        roots.len()
    ))
}

/// Asks twice, one question per round.
#[tool(query, name = "test_input_required_result_multi_round")]
async fn test_input_required_result_multi_round(ask: Elicit) -> Result<String, ToolError> {
    let name = name_of(ask.named("step1").ask("Step 1: What is your name?").await?);
    let color = match ask
        .named("step2")
        .ask::<Colour>("Step 2: What is your favorite color?")
        .await?
    {
        Answer::Accepted(Colour { color }) => color,
        Answer::Declined | Answer::Cancelled => "no colour".to_owned(),
    };
    Ok(format!("Multi-round complete for {name} who likes {color}"))
}

/// Asks for a confirmation under a sealed state: an altered state is refused.
#[tool(query, name = "test_input_required_result_tampered_state")]
async fn test_input_required_result_tampered_state(ask: Elicit) -> Result<String, ToolError> {
    let answer = ask
        .named("confirm")
        .ask::<Confirmation>("Please confirm")
        .await?;
    Ok(format!("integrity-ok: state verified ({answer:?})"))
}

/// Asks only what the client declared it can answer: the user if `elicitation`, the model if
/// `sampling`.
#[tool(query, name = "test_input_required_result_capabilities")]
async fn test_input_required_result_capabilities(
    ask: Elicit,
    sample: Sample,
) -> Result<String, ToolError> {
    let user = async {
        if ask.supported() {
            let answer = ask
                .named("elicit_input")
                .ask::<Input>("Elicitation input")
                .await?;
            Ok(Some(completed(answer)))
        } else {
            Ok::<_, ToolError>(None)
        }
    };
    let model = async {
        if sample.supported() {
            Ok(Some(
                sample
                    .named("sample_input")
                    .text("Sample request", 50)
                    .await?,
            ))
        } else {
            Ok::<_, ToolError>(None)
        }
    };
    let (user, model) = tokio::join!(user, model);
    let received: Vec<String> = [user?, model?].into_iter().flatten().collect();
    Ok(if received.is_empty() {
        "No supported capabilities declared".to_owned()
    } else {
        format!("capabilities-ok: received {}", received.join(", "))
    })
}

// ---------------------------------------------------------------------------------------------
// JSON Schema 2020-12 (SEP-1613, SEP-2106): an input schema with the whole vocabulary

/// A postal address (`$defs.address`, anchored).
#[fusion::data]
#[derive(Debug)]
#[schemars(rename = "address", extend("$anchor" = "addressDef"))]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

/// How to reach someone.
#[fusion::data]
#[derive(Debug)]
#[serde(rename_all = "lowercase")]
enum ContactMethod {
    Phone,
    Email,
}

/// A contact: a phone number or an e-mail address, the one the contact method names. The
/// rules across fields are the type's own schema; the tool takes the type whole, so they are
/// its input schema's, and enforced before the handler runs.
#[fusion::data]
#[derive(Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend(
    "allOf" = [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if" = {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then" = {"required": ["phone"]},
    "else" = {"required": ["email"]}
))]
struct Contact {
    name: Option<String>,
    address: Option<Address>,
    contact_method: Option<ContactMethod>,
    phone: Option<String>,
    email: Option<String>,
}

/// The tool's arguments are the contact's fields.
impl ArgumentGroup for Contact {
    const FIELDS: &'static [&'static str] = &["name", "address", "contactMethod", "phone", "email"];
}

/// Tool with JSON Schema 2020-12 features (SEP-1613): echoes the contact it was given.
#[tool(query, name = "json_schema_2020_12_tool")]
async fn json_schema_2020_12_tool(contact: Contact) -> Result<Contact, ToolError> {
    Ok(contact)
}

// ---------------------------------------------------------------------------------------------
// Arguments mirrored in HTTP headers (SEP-2243)

/// Where a request goes.
#[fusion::data]
#[derive(Debug)]
#[serde(deny_unknown_fields)]
struct Route {
    /// The region the request is for; a client also sends it as the `Mcp-Param-Region` header,
    /// which must match.
    #[schemars(extend("x-mcp-header" = "Region"))]
    region: String,
}

/// The tool's arguments are the route's fields.
impl ArgumentGroup for Route {
    const FIELDS: &'static [&'static str] = &["region"];
}

/// Tests `x-mcp-header`: the region travels in the body and in a header, checked to agree.
#[tool(query, name = "test_custom_headers")]
async fn test_custom_headers(route: Route) -> Result<String, ToolError> {
    Ok(format!("Region: {}", route.region))
}
