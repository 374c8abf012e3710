//! The suite's resources.

use fusion::{Blob, ServerBuilder, ToolError, resource};

pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .resource::<static_text>()
        .resource::<static_binary>()
        .resource::<template_data>()
        .resource::<watched>()
}

/// A resource clients subscribe to (`resources/subscribe`, on a session).
#[resource(uri = "test://watched-resource", name = "watched_resource", title = "Watched Resource",
           mime = "text/plain", cache = volatile)]
async fn watched() -> Result<String, ToolError> {
    Ok("Watched resource content".to_owned())
}

/// A static text resource for testing.
#[resource(uri = "test://static-text", name = "static_text", title = "Static Text Resource",
           mime = "text/plain", cache = immutable)]
async fn static_text() -> Result<String, ToolError> {
    Ok("This is the content of the static text resource.".to_owned())
}

/// A static binary resource (an image) for testing.
#[resource(uri = "test://static-binary", name = "static_binary", title = "Static Binary Resource",
           mime = "image/png", cache = immutable)]
async fn static_binary() -> Result<Blob, ToolError> {
    Ok(Blob::from(crate::PIXEL_PNG))
}

/// What `test://template/{id}/data` reads as.
#[fusion::data(serialize, schema)]
#[derive(Debug)]
#[serde(rename_all = "camelCase")]
struct TemplateData {
    id: String,
    template_test: bool,
    data: String,
}

/// A resource template with parameter substitution.
#[resource(
    uri = "test://template/{id}/data",
    name = "template",
    title = "Resource Template",
    mime = "application/json"
)]
async fn template_data(id: String) -> Result<TemplateData, ToolError> {
    Ok(TemplateData {
        data: format!("Data for ID: {id}"),
        id,
        template_test: true,
    })
}
