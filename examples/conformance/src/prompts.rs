//! The suite's prompts.

use fusion::complete::CompletionRequest;
use fusion::{
    Answer, CallContext, Elicit, Media, PromptMessages, ServerBuilder, ToolError, prompt,
};

pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .prompt::<test_simple_prompt>()
        .prompt::<test_prompt_with_arguments>()
        .prompt::<test_prompt_with_embedded_resource>()
        .prompt::<test_prompt_with_image>()
        .prompt::<test_input_required_result_prompt>()
}

/// A simple prompt without arguments.
#[prompt(name = "test_simple_prompt", title = "Simple Test Prompt")]
async fn test_simple_prompt() -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user("This is a simple prompt for testing."))
}

/// Words `arg1` may start with.
const SUGGESTIONS: [&str; 3] = ["paris", "park", "party"];

async fn complete_arg1(
    _: CallContext,
    request: CompletionRequest,
) -> Result<Vec<String>, ToolError> {
    Ok(SUGGESTIONS
        .into_iter()
        .filter(|word| word.starts_with(request.value()))
        .map(str::to_owned)
        .collect())
}

/// A prompt with required arguments.
#[prompt(name = "test_prompt_with_arguments", title = "Prompt With Arguments",
         complete(arg1 = complete_arg1))]
async fn test_prompt_with_arguments(
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!(
        "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    )))
}

/// A prompt that includes an embedded resource.
#[prompt(
    name = "test_prompt_with_embedded_resource",
    title = "Prompt With Embedded Resource"
)]
// The suite names this argument in camelCase.
#[allow(non_snake_case)]
async fn test_prompt_with_embedded_resource(
    /// URI of the resource to embed
    resourceUri: String,
) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new()
        .user_media(Media::resource_text(
            resourceUri,
            "text/plain",
            "Embedded resource content for testing.",
        ))
        .user("Please process the embedded resource above."))
}

/// A prompt that includes image content.
#[prompt(name = "test_prompt_with_image", title = "Prompt With Image")]
async fn test_prompt_with_image() -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new()
        .user_media(Media::image(crate::PIXEL_PNG, "image/png"))
        .user("Please analyze the image above."))
}

/// What the prompt is about, as asked.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct Context {
    context: String,
}

/// A prompt that asks the user for its context before it is written.
#[prompt(name = "test_input_required_result_prompt")]
async fn test_input_required_result_prompt(ask: Elicit) -> Result<PromptMessages, ToolError> {
    let context = match ask
        .named("user_context")
        .ask::<Context>("What context should the prompt use?")
        .await?
    {
        Answer::Accepted(Context { context }) => context,
        Answer::Declined | Answer::Cancelled => "none".to_owned(),
    };
    Ok(PromptMessages::new().user(format!("Prompt with context: {context}")))
}
