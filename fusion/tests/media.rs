//! Content that is not text: images, sounds and embedded resources attached to a tool's
//! result or a prompt, and bytes read as a binary resource, in both protocol eras.

mod common;

use std::time::Duration;

use common::*;
use fusion::protocol as rmcp;
use fusion::serve::Mcp;
use fusion::testing::Tester;
use fusion::{
    Blob, Media, PromptMessages, ServerBuilder, State, ToolError, WithMedia, prompt, resource, tool,
};
use rmcp::model::{
    ClientConfig, ContentBlock, GetPromptRequestParams, InitializeResult, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::serve_directly;
use rmcp::{RoleClient, RoleServer, ServiceExt};
use serde_json::json;

const PIXEL: &[u8] = b"\x89PNG\r\n\x1a\nnot really a picture";
// What the wire carries for PIXEL: standard base64.
const PIXEL_BASE64: &str = "iVBORw0KGgpub3QgcmVhbGx5IGEgcGljdHVyZQ==";

/// A chart, as a picture and its source.
#[tool(query, name = "charts.render")]
async fn render() -> Result<WithMedia<&'static str>, ToolError> {
    Ok(WithMedia::new("The chart of the quarter.")
        .with(Media::image(PIXEL, "image/png"))
        .with(Media::audio(b"RIFF", "audio/wav"))
        .with(Media::resource_text(
            "charts://q3/source",
            "text/csv",
            "month,total\n7,10",
        )))
}

/// One invoice, with its scanned copy: the invoice still goes through its presenter.
#[tool(query, name = "billing.scan", returns = InvoiceView)]
async fn scan(db: State<Db>, id: String) -> Result<WithMedia<Invoice>, ToolError> {
    let invoice = db
        .invoices
        .lock()
        .unwrap()
        .iter()
        .find(|invoice| invoice.id == id)
        .cloned()
        .ok_or_else(|| ToolError::not_found(format!("No invoice {id}.")))?;
    Ok(WithMedia::new(invoice).with(Media::resource_blob(
        format!("billing://scans/{id}"),
        "application/pdf",
        b"%PDF-1.7",
    )))
}

/// The logo of the company.
#[resource(uri = "brand://logo", name = "brand.logo", mime = "image/png")]
async fn logo() -> Result<Blob, ToolError> {
    Ok(Blob::from(PIXEL))
}

/// Raw bytes without a declared type.
#[resource(uri = "brand://raw", name = "brand.raw")]
async fn raw() -> Result<Blob, ToolError> {
    Ok(Blob(vec![0, 1, 2]))
}

/// Describe the picture.
#[prompt(name = "brand.describe")]
async fn describe() -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new()
        .user_media(Media::image(PIXEL, "image/png"))
        .assistant_media(Media::resource_text("brand://notes", "text/plain", "Red."))
        .user("Describe the picture above."))
}

fn server() -> fusion::Server {
    tools(ServerBuilder::new("brand", "1.0.0").state(Db::seeded()))
        .tool::<render>()
        .tool::<scan>()
        .resource::<logo>()
        .resource::<raw>()
        .prompt::<describe>()
        .build()
        .expect("the server builds")
}

#[tokio::test]
async fn media_follow_the_text_blocks_of_a_tool_result() {
    let result = Tester::new(server()).call("charts.render", json!({})).await;
    assert!(!result.is_error());
    assert_eq!(result.data(), &json!("The chart of the quarter."));
    let content = &result.raw().content;
    // The data's text first, then the media in order.
    assert!(content[0].as_text().is_some());
    let media: Vec<&ContentBlock> = content.iter().filter(|b| b.as_text().is_none()).collect();
    assert_eq!(media.len(), 3, "{content:?}");
    let image = media[0].as_image().expect("an image");
    assert_eq!(
        (image.data.as_str(), image.mime_type.as_str()),
        (PIXEL_BASE64, "image/png")
    );
    let audio = media[1].as_audio().expect("a sound");
    assert_eq!(
        (audio.data.as_str(), audio.mime_type.as_str()),
        ("UklGRg==", "audio/wav")
    );
    let resource = media[2].as_resource().expect("a resource");
    assert_eq!(
        serde_json::to_value(&resource.resource).unwrap(),
        json!({"uri": "charts://q3/source", "mimeType": "text/csv", "text": "month,total\n7,10"})
    );
    // Last: nothing follows the media.
    assert!(content.last().unwrap().as_resource().is_some());
}

#[tokio::test]
async fn a_presented_result_with_media_keeps_its_presenter() {
    let result = Tester::new(server())
        .call("billing.scan", json!({"id": "INV-2"}))
        .await;
    assert!(!result.is_error(), "{:?}", result.raw());
    assert_eq!(result.data()["id"], "INV-2");
    assert!(result.data().get("api_key").is_none());
    assert!(!result.rules().is_empty(), "the presenter's rules");
    assert_no_secret(&result.raw_text());
    let blob = result.raw().content.last().unwrap().as_resource().unwrap();
    assert_eq!(
        serde_json::to_value(&blob.resource).unwrap(),
        json!({"uri": "billing://scans/INV-2", "mimeType": "application/pdf", "blob": "JVBERi0xLjc="})
    );
    // The output schema describes the data, as without media.
    let tool = result_tool_schema("billing_scan");
    let with_plain = result_tool_schema("billing_get_invoice");
    assert_eq!(tool, with_plain);
}

fn result_tool_schema(name: &str) -> serde_json::Value {
    let server = server();
    let tool = server.tool(name).unwrap();
    let schema = serde_json::to_value(tool.definition().output_schema.as_ref()).unwrap();
    schema["properties"]["data"].clone()
}

/// rmcp's client over an in-memory pipe: with the `initialize` handshake, and already on
/// 2026-07-28.
async fn clients(mcp: &Mcp) -> Vec<rmcp::service::RunningService<RoleClient, ()>> {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let session = ().serve(client_io).await.expect("client handshake");
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let mut client_info = ClientConfig::default();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let stateless =
        serve_directly::<RoleClient, _, _, _, _>((), client_io, Some(server_info.into()));
    vec![session, stateless]
}

#[tokio::test]
async fn bytes_are_read_as_a_binary_resource_in_both_eras() {
    let mcp = Mcp::new(server());
    let listed: Vec<_> = mcp
        .handler()
        .server()
        .resources()
        .map(|r| r.mime_type().to_owned())
        .collect();
    assert_eq!(listed, ["image/png", "application/octet-stream"]);
    for client in clients(&mcp).await {
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            client.read_resource(ReadResourceRequestParams::new("brand://logo")),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(read.contents.len(), 1);
        match &read.contents[0] {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                assert_eq!(uri, "brand://logo");
                assert_eq!(mime_type.as_deref(), Some("image/png"));
                assert_eq!(blob, PIXEL_BASE64);
            }
            other => panic!("expected a blob, got {other:?}"),
        }
        let raw = client
            .read_resource(ReadResourceRequestParams::new("brand://raw"))
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&raw.contents).unwrap(),
            json!([{"uri": "brand://raw", "mimeType": "application/octet-stream", "blob": "AAEC"}])
        );
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_prompt_carries_media_messages() {
    let mcp = Mcp::new(server());
    for client in clients(&mcp).await {
        let prompt = client
            .get_prompt(GetPromptRequestParams::new("brand_describe"))
            .await
            .unwrap();
        let messages = serde_json::to_value(&prompt.messages).unwrap();
        assert_eq!(
            messages,
            json!([
                {"role": "user", "content": {"type": "image", "data": PIXEL_BASE64, "mimeType": "image/png"}},
                {"role": "assistant", "content": {"type": "resource", "resource":
                    {"uri": "brand://notes", "mimeType": "text/plain", "text": "Red."}}},
                {"role": "user", "content": {"type": "text", "text": "Describe the picture above."}}
            ])
        );
        client.cancel().await.unwrap();
    }
}
