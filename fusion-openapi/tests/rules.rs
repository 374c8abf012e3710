//! What the generator makes of each construct, on small documents written for the purpose
//! (the real documents are in `generated.rs`, which also compiles `tests/shapes.json`, every
//! shape these tests look at): hidden and read-only fields, identifiers, routes, constant
//! headers, free-form bodies, the overlay, names, labels, links between tools, the base URL
//! and credentials, and every unsupported construct reported with its operation skipped.

use fusion_openapi::{Options, Overlay, generate};
use serde_json::json;

fn lib_of(document: &serde_json::Value) -> (String, fusion_openapi::Report) {
    let generated = generate(&document.to_string(), &Options::default()).unwrap();
    (
        generated.file("src/lib.rs").unwrap().to_owned(),
        generated.report,
    )
}

fn skipped<'a>(report: &'a fusion_openapi::Report, operation: &str) -> &'a str {
    report
        .skipped
        .iter()
        .find(|(label, _)| label.starts_with(operation))
        .map(|(_, reason)| reason.as_str())
        .unwrap_or_else(|| panic!("{operation} was not skipped: {report}"))
}

fn user_api() -> serde_json::Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Users", "version": "1"},
        "paths": {
            "/users": {"post": {
                "operationId": "createUser",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}},
                "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}}}
            }},
            "/users/{userId}": {"get": {
                "operationId": "getUser",
                "parameters": [{"name": "userId", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}}}
            }},
            "/files/{name}.json": {"get": {
                "operationId": "getFile",
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }},
            "/pairs/{a}-{b}": {"get": {
                "operationId": "getPair",
                "parameters": [
                    {"name": "a", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "b", "in": "path", "required": true, "schema": {"type": "string"}}
                ],
                "responses": {"204": {"description": "none"}}
            }},
            "/forms": {"post": {
                "operationId": "postForm",
                "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "string"}}}},
                "responses": {"204": {"description": "none"}}
            }},
            "/bulk": {"post": {
                "operationId": "postBulk",
                "requestBody": {"content": {"application/json": {}}},
                "responses": {"204": {"description": "none"}}
            }},
            "/remote": {"get": {
                "operationId": "getRemote",
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "other.yaml#/components/schemas/X"}}}}}
            }},
            "/signed": {"get": {
                "operationId": "getSigned",
                "parameters": [{"name": "X-Signature", "in": "header", "required": true, "schema": {"type": "string"}}],
                "responses": {"204": {"description": "none"}}
            }},
            "/either": {"get": {
                "operationId": "getEither",
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}}}
            }},
            "/report": {"get": {
                "operationId": "getReport",
                "responses": {"200": {"description": "ok", "content": {"application/pdf": {"schema": {"type": "string", "format": "binary"}}}}}
            }}
        },
        "components": {"schemas": {"User": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "id": {"type": "integer", "readOnly": true},
                "name": {"type": "string", "description": "The user's name"},
                "password": {"type": "string", "writeOnly": true},
                "apiToken": {"type": "string"},
                "recoveryCode": {"type": "string", "writeOnly": true},
                "type": {"type": "string", "enum": ["admin", "member"]},
                "2fa": {"type": "boolean"},
                "self": {"type": "string"},
                "settings": {"type": "object", "properties": {"signingKey": {"type": "string", "writeOnly": true}}}
            }
        }}}
    })
}

#[test]
fn secrets_are_hidden_read_only_fields_are_not_fillable_and_names_are_identifiers() {
    let (lib, report) = lib_of(&user_api());
    // writeOnly and secret-looking names are hidden: never presented.
    for field in ["password", "api_token", "recovery_code"] {
        let declaration = format!("pub {field}: fusion::Hidden<");
        assert!(lib.contains(&declaration), "{field} is not hidden:\n{lib}");
    }
    let view = lib
        .lines()
        .find(|line| line.contains("#[fusion::presenter(User,"))
        .unwrap();
    for field in ["password", "api_token", "recovery_code", "settings"] {
        assert!(!view.contains(field), "{field} is presented: {view}");
    }
    // Nested data declaring a writeOnly field is neither cast nor presented.
    assert!(lib.contains("Not cast: nested data"), "{lib}");
    // readOnly is not fillable; a hidden writeOnly field is (a new password goes upstream).
    let model = lib
        .lines()
        .find(|line| line.contains("#[fusion::model(upstream"))
        .unwrap();
    assert!(model.contains("create = ["), "{model}");
    assert!(!model.contains(" id,") && !model.contains("[id"), "{model}");
    assert!(model.contains("password"), "{model}");
    // Identifiers: keywords raw, leading digits prefixed, `self` renamed; the upstream's
    // names kept for the wire.
    assert!(lib.contains("pub r#type: Option<String>"), "{lib}");
    assert!(lib.contains("#[upstream(name = \"2fa\")]"), "{lib}");
    assert!(lib.contains("pub n_2fa: Option<bool>"), "{lib}");
    assert!(lib.contains("pub self_: Option<String>"), "{lib}");
    assert!(lib.contains("#[upstream(name = \"apiToken\")]"), "{lib}");
    assert!(
        lib.contains("pub async fn get_user(\n    user_id: i64,"),
        "{lib}"
    );
    assert!(lib.contains(r#"http = "GET /users/{user_id}""#), "{lib}");
    assert_eq!(report.operations, 10);
}

#[test]
fn a_parameter_with_text_around_it_keeps_its_segment() {
    let (lib, _) = lib_of(&user_api());
    assert!(lib.contains(r#"http = "GET /files/{name}.json""#), "{lib}");
}

#[test]
fn several_parameters_in_one_segment_are_each_encoded_inside_it() {
    let (lib, report) = lib_of(&user_api());
    assert!(
        !report
            .skipped
            .iter()
            .any(|(op, _)| op.starts_with("GET /pairs")),
        "{report}"
    );
    let tool = &lib[lib.find("pub async fn get_pair(").unwrap()..];
    let tool = &tool[..tool.find("\n}\n").unwrap()];
    assert!(
        tool.contains(r#"request.literal(&[segment_part("a", &a)?, "-".to_owned(), segment_part("b", &b)?].concat());"#),
        "{tool}"
    );
    assert!(lib.contains("fn segment_part("), "{lib}");
}

#[test]
fn every_unsupported_construct_skips_its_operation_with_a_reason() {
    let (lib, report) = lib_of(&user_api());
    for (operation, reason) in [
        (
            "POST /forms",
            "the `application/x-www-form-urlencoded` request body is not an object: a form has named fields",
        ),
        (
            "POST /bulk",
            "the `application/json` request body has no schema",
        ),
        ("GET /remote", "is not a local reference"),
        (
            "GET /signed",
            "the required header `X-Signature` takes a value the caller chooses",
        ),
        (
            "GET /report",
            "the response is `application/pdf`, binary data that is neither JSON, text, an image nor a sound",
        ),
    ] {
        let why = skipped(&report, operation);
        assert!(why.contains(reason), "{operation}: {why}");
    }
    for tool in ["post_form", "post_bulk", "get_remote", "get_signed"] {
        assert!(
            !lib.contains(&format!("fn {tool}(")),
            "{tool} was generated"
        );
    }
    assert_eq!(report.tools + report.skipped.len(), report.operations);
    // createUser, getUser, getFile, getPair, and getEither: a oneOf of scalars is shown as
    // the upstream sends it.
    assert_eq!(report.tools, 5, "{report}");
    assert!(
        lib.contains("pub async fn get_either(\n) -> Result<fusion::serde_json::Value"),
        "{lib}"
    );
}

#[test]
fn documents_that_are_not_openapi_3_are_refused_with_a_reason() {
    for (text, reason) in [
        (r#"{"swagger": "2.0", "paths": {}}"#, "Swagger 2.0"),
        (r#"{"openapi": "4.0.0", "paths": {}}"#, "not supported"),
        ("{ not json: [", "neither JSON"),
        ("title: no version", "no `openapi` version"),
    ] {
        let error = generate(text, &Options::default()).unwrap_err();
        assert!(error.to_string().contains(reason), "{text}: {error}");
    }
}

#[test]
fn openapi_3_1_type_lists_and_yaml_are_read() {
    let yaml = r#"
openapi: 3.1.0
info: {title: Notes, version: "2"}
paths:
  /notes/{id}:
    get:
      operationId: getNote
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                required: [id, body]
                properties:
                  id: {type: string}
                  body: {type: [string, "null"]}
"#;
    let generated = generate(yaml, &Options::default()).unwrap();
    let lib = generated.file("src/lib.rs").unwrap();
    assert!(lib.contains("pub id: String"), "{lib}");
    assert!(lib.contains("pub body: Option<String>"), "{lib}");
    assert_eq!(generated.name, "notes-connector");
}

#[test]
fn run_is_the_whole_command() {
    let dir = std::env::temp_dir().join(format!("fusion-openapi-run-{}", std::process::id()));
    let spec = dir.join("users.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&spec, user_api().to_string()).unwrap();
    let out = dir.join("out");
    let written = fusion_openapi::run(&spec, &out, Some("users-mcp"), None).unwrap();
    assert_eq!(written.name, "users-mcp");
    assert_eq!(written.report.tools, 5);
    for file in ["Cargo.toml", "src/lib.rs", "src/main.rs", "README.md"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    let printed = written.to_string();
    assert!(
        printed.contains("5 of 10 operations became tools"),
        "{printed}"
    );
    assert!(printed.contains("wrote users-mcp to"), "{printed}");
    let missing = fusion_openapi::run(&dir.join("nope.yaml"), &out, None, None).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn shapes() -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/shapes.json"))
            .unwrap(),
    )
    .unwrap()
}

/// The lines of the item that starts with `start`, up to its closing line.
fn item<'a>(lib: &'a str, start: &str) -> &'a str {
    let from = lib
        .find(start)
        .unwrap_or_else(|| panic!("no `{start}` in:\n{lib}"));
    let rest = &lib[from..];
    let end = rest
        .find("\n}\n")
        .map_or(rest.len(), |end| end + 3)
        .min(rest.find(";\n\n").map_or(rest.len(), |end| end + 1));
    &rest[..end]
}

#[test]
fn a_constant_header_is_sent_by_the_tool_with_its_call() {
    let (lib, report) = lib_of(&shapes());
    let tool = item(&lib, "pub async fn create_connection(");
    assert!(
        tool.contains("upstream: fusion::State<fusion::HttpUpstream>"),
        "{tool}"
    );
    assert!(
        tool.contains(r#"request.header("X-Amz-Target", "Shapes_20240101.CreateConnection")?;"#),
        "{tool}"
    );
    assert!(tool.contains("upstream.send(request)"), "{tool}");
    // The header is no argument: agents never choose headers.
    assert!(!tool.to_lowercase().contains("x_amz_target"), "{tool}");
    // The fragment that told the operations apart is not part of the route.
    assert!(
        tool.contains(r#"UpstreamRequest::new(fusion::upstream::HttpMethod::Post, "POST /")"#),
        "{tool}"
    );
    // One upstream, one pooled client, for every tool.
    assert!(
        lib.contains("pub fn server(upstream: fusion::HttpUpstream) -> Result<fusion::Server, fusion::BuildError>"),
        "{lib}"
    );
    assert!(!lib.contains("HeaderUpstreams"), "{lib}");
    assert!(
        report
            .skipped
            .iter()
            .all(|(op, _)| !op.contains("X-Amz-Target")),
        "{report}"
    );
}

#[test]
fn form_multipart_raw_and_array_bodies_are_built_by_the_tool() {
    let (lib, report) = lib_of(&shapes());
    assert!(report.skipped.is_empty(), "{report}");
    // A form: the profile's fields under their upstream names, form-encoded.
    let tool = item(&lib, "pub async fn send_message(");
    assert!(
        tool.contains("body: fusion::Create<SendMessageBody>"),
        "{tool}"
    );
    assert!(
        tool.contains("request.group(fusion::upstream::Placement::Body, &body)?;")
            && tool.contains("request.set_encoding(fusion::upstream::BodyEncoding::Form);"),
        "{tool}"
    );
    // A token in a form is hidden like any other secret.
    assert!(lib.contains("pub auth_token: fusion::Hidden<"), "{lib}");
    // A free-form form body.
    let tool = item(&lib, "pub async fn set_settings(");
    assert!(
        tool.contains("request.set_encoding(fusion::upstream::BodyEncoding::Form);"),
        "{tool}"
    );
    // Multipart: the binary fields are files the agent gives as base64, and say so.
    let tool = item(&lib, "pub async fn upload_file(");
    assert!(
        tool.contains("request.set_encoding(fusion::upstream::BodyEncoding::Multipart);")
            && tool.contains(r#"request.file_fields(&["attachments", "file"]);"#),
        "{tool}"
    );
    assert!(
        lib.contains(r#"#[cast("The file: a file, as base64 text")]"#),
        "{lib}"
    );
    // Raw bytes from base64, raw text as it is (optional when the body is).
    let tool = item(&lib, "pub async fn put_widget_image(");
    assert!(
        tool.contains(r#"request.base64_body("body", "application/octet-stream", &body)?;"#),
        "{tool}"
    );
    let tool = item(&lib, "pub async fn create_call(");
    assert!(tool.contains("body: Option<String>"), "{tool}");
    assert!(
        tool.contains(r#"request.bytes_body("application/sdp", value.into_bytes());"#),
        "{tool}"
    );
    // JSON arrays and scalars are sent whole; an array's items are described.
    let tool = item(&lib, "pub async fn create_widgets(");
    assert!(
        tool.contains("body: Vec<fusion::serde_json::Value>")
            && tool.contains("Each item is a WidgetInput JSON object with: colour (required).")
            && tool.contains("request.json_body(&body)?;"),
        "{tool}"
    );
    // Answers that are not JSON: text as a string, an image as an image block.
    let tool = item(&lib, "pub async fn get_widget_report(");
    assert!(
        tool.contains("-> Result<String, fusion::ToolError>")
            && tool.contains(r#"request.header("accept", "text/csv")?;"#)
            && tool.contains("let bytes = upstream.send_bytes(request).await?;"),
        "{tool}"
    );
    let tool = item(&lib, "pub async fn get_ticket_qr(");
    assert!(
        tool.contains("-> Result<fusion::WithMedia<String>, fusion::ToolError>")
            && tool.contains(r#"fusion::Media::image(bytes, "image/png")"#),
        "{tool}"
    );
    let tool = item(&lib, "pub async fn set_widget_rank(");
    assert!(
        tool.contains("body: Option<i64>") && tool.contains("request.json_body(&value)?;"),
        "{tool}"
    );
}

#[test]
fn free_form_and_one_of_bodies_are_json_objects_the_description_explains() {
    let (lib, _) = lib_of(&shapes());
    let tool = item(&lib, "pub async fn put_metadata(");
    assert!(
        tool.contains("body: fusion::serde_json::Map<String, fusion::serde_json::Value>,"),
        "{tool}"
    );
    assert!(
        tool.contains("request.arg(fusion::upstream::Placement::Body, name, value)?;"),
        "{tool}"
    );
    let tool = item(&lib, "pub async fn create_payment(");
    assert!(tool.contains("One of: Card, BankTransfer"), "{tool}");
}

#[test]
fn secrets_are_judged_by_the_field_itself_not_by_what_its_items_hold() {
    let (lib, _) = lib_of(&shapes());
    let model = item(&lib, "pub struct DataSetList {");
    // USPTO's case: `apis` is a list of data sets whose items have an `apiKey` (a data set's
    // name): the list is not a secret and is shown.
    assert!(
        model.contains("pub apis: Option<Vec<fusion::serde_json::Value>>"),
        "{model}"
    );
    let view = item(&lib, "#[fusion::presenter(DataSetList,");
    assert!(view.contains("apis"), "{view}");
    // `format: password`, a token, an access key: hidden. A paging token and a tag's `Key`:
    // not secrets.
    let account = item(&lib, "pub struct Account {");
    for hidden in ["passcode", "refresh_token", "access_key_id"] {
        assert!(
            account.contains(&format!("pub {hidden}: fusion::Hidden<")),
            "{hidden}: {account}"
        );
    }
    for shown in ["next_token", "key"] {
        assert!(
            account.contains(&format!("pub {shown}: Option<String>")),
            "{shown}: {account}"
        );
    }
}

#[test]
fn a_model_whose_fields_are_all_nested_or_hidden_never_gets_an_empty_presenter() {
    let (lib, report) = lib_of(&shapes());
    assert!(!lib.contains("fields())"), "{lib}");
    // All nested: presented, its fields shown as JSON.
    let view = item(&lib, "#[fusion::presenter(Nested,");
    assert!(view.contains("fields(children, meta)"), "{view}");
    // All hidden: the tool reports success only, and no presenter is written.
    assert!(
        lib.contains("pub async fn rotate_secret(\n) -> Result<(), fusion::ToolError>;"),
        "{lib}"
    );
    assert!(!lib.contains("SecretOnlyView"), "{lib}");
    assert!(
        report
            .notes
            .iter()
            .any(|note| note.contains("shapes.rotate_secret")),
        "{report}"
    );
    // A model used only as a body has a profile and no presenter.
    assert!(!lib.contains("WidgetInputView"), "{lib}");
    assert!(lib.contains("pub struct WidgetInput {"), "{lib}");
}

#[test]
fn tools_are_namespaced_labelled_linked_and_look_up_what_was_not_found() {
    let (lib, _) = lib_of(&shapes());
    assert!(lib.contains(r#"name = "shapes.list_widgets""#), "{lib}");
    // Labels: the description, or the name in words and what its format means.
    let widget = item(&lib, "pub struct Widget {");
    assert!(
        widget.contains(r#"#[cast("Created at: a date and time, RFC 3339")]"#),
        "{widget}"
    );
    assert!(widget.contains(r#"#[cast("Id: an integer")]"#), "{widget}");
    assert!(
        widget.contains(r#"#[cast("The widget's colour")]"#),
        "{widget}"
    );
    assert!(!widget.contains("[int64]"), "{widget}");
    // A mutation invalidates the tools that read its resource.
    let delete = item(&lib, "#[doc = \"Deletes a widget.\"]");
    assert!(
        delete.contains(r#"invalidates = ["shapes.list_widgets", "shapes.get_widget"]"#),
        "{delete}"
    );
    // A tool taking an id names the list tool when the upstream answers 404.
    let get = item(&lib, "pub async fn get_widget(");
    assert!(
        get.contains(r#".map_err(|error| look_up_with(error, "shapes.list_widgets"))"#),
        "{get}"
    );
}

#[test]
fn descriptions_are_cut_to_the_token_budget() {
    let (lib, _) = lib_of(&shapes());
    let doc = lib
        .lines()
        .find(|line| line.starts_with("#[doc = \"Lists widgets."))
        .unwrap();
    // 100 tokens, about 400 characters, and an ellipsis.
    assert!(doc.chars().count() < 420, "{doc}");
    assert!(doc.contains('…'), "{doc}");
    let overlay = Overlay {
        description_tokens: 10,
        ..Overlay::default()
    };
    let options = Options {
        overlay,
        ..Options::default()
    };
    let generated = generate(&shapes().to_string(), &options).unwrap();
    let lib = generated.file("src/lib.rs").unwrap();
    let doc = lib
        .lines()
        .find(|line| line.starts_with("#[doc = \"Lists widgets."))
        .unwrap();
    assert!(doc.chars().count() < 60, "{doc}");
}

#[test]
fn an_overlay_selects_renames_guards_and_adds_rules() {
    let overlay = Overlay::parse(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/shapes.overlay.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let options = Options {
        overlay,
        ..Options::default()
    };
    let generated = generate(&shapes().to_string(), &options).unwrap();
    let lib = generated.file("src/lib.rs").unwrap();
    let report = &generated.report;
    assert!(lib.contains(r#"name = "widgets.find_widgets""#), "{lib}");
    assert!(lib.contains(r#"name = "widgets.get_widget""#), "{lib}");
    assert!(lib.contains(r#"name = "widgets.rotate_secret""#), "{lib}");
    assert!(lib.contains(r#"name = "widgets.create_widget""#), "{lib}");
    assert!(!lib.contains("delete_widget"), "{lib}");
    assert!(!lib.contains("create_connection"), "{lib}");
    assert_eq!(report.tools, 4, "{report}");
    assert_eq!(
        report.tools + report.skipped.len() + report.excluded,
        report.operations
    );
    let widget = item(lib, "pub struct Widget {");
    assert!(
        widget.contains("#[guarded]\n    #[hidden]\n    #[upstream(name = \"tenantId\")]\n    pub tenant_id: fusion::Hidden<"),
        "{widget}"
    );
    assert!(widget.contains("pub colour: fusion::Hidden<"), "{widget}");
    assert!(
        lib.contains(r#"- Look a widget up before changing it."#),
        "{lib}"
    );
    assert!(
        generated
            .to_owned()
            .report
            .to_string()
            .contains("the overlay left out")
    );
}

#[test]
fn a_bad_overlay_is_refused_with_what_is_wrong() {
    for (text, reason) in [
        ("exclud: []", "unknown setting `exclud`"),
        ("include: [{label: x}]", "`label` is not a selector"),
        ("namespace: Bad-Name", "must be lower-case letters"),
        ("description_tokens: 1", "at least 5"),
        ("- a list", "not a mapping"),
    ] {
        let error = Overlay::parse(text).unwrap_err();
        assert!(error.to_string().contains(reason), "{text}: {error}");
    }
}

#[test]
fn the_base_url_comes_from_the_server_template_and_credentials_from_the_environment() {
    let generated = generate(&shapes().to_string(), &Options::default()).unwrap();
    let lib = generated.file("src/lib.rs").unwrap();
    let main = generated.file("src/main.rs").unwrap();
    let readme = generated.file("README.md").unwrap();
    assert!(
        lib.contains("pub const DEFAULT_BASE_URL: Option<&str> = None;"),
        "{lib}"
    );
    assert!(
        lib.contains(r#"pub const BASE_URL_TEMPLATE: (&str, &[(&str, &str)]) = ("https://{region}.shapes.example.com/{version}", &[("region", "eu"), ("version", "v2")]);"#),
        "{lib}"
    );
    assert!(main.contains("API_SERVER_"), "{main}");
    assert!(readme.contains("API_SERVER_<VARIABLE>"), "{readme}");
    // The README names the tools as agents call them, not only by their keys.
    assert!(
        readme.contains("agents call them `shapes_<tool>`"),
        "{readme}"
    );
    // A token scheme (here OAuth client credentials) is preferred to the API key header:
    // API_TOKEN is a bearer token, from the environment; no argument carries it.
    assert!(main.contains("Err(_) => upstream.bearer(token),"), "{main}");
    assert!(!lib.contains("api_key:"), "{lib}");
    // With an API key header only, API_TOKEN goes in that header.
    let mut keyed = shapes();
    keyed["components"]["securitySchemes"]
        .as_object_mut()
        .unwrap()
        .remove("oauthClient");
    let generated = generate(&keyed.to_string(), &Options::default()).unwrap();
    let keyed_main = generated.file("src/main.rs").unwrap();
    assert!(
        keyed_main.contains(r#"unwrap_or_else(|_| "X-Api-Key".to_owned()), token)"#),
        "{keyed_main}"
    );
    // With an API key in the query only, API_TOKEN goes in that query parameter.
    keyed["components"]["securitySchemes"] = json!({
        "queryKey": {"type": "apiKey", "in": "query", "name": "api_key"}
    });
    let generated = generate(&keyed.to_string(), &Options::default()).unwrap();
    let query_main = generated.file("src/main.rs").unwrap();
    assert!(
        query_main.contains(r#"upstream = upstream.query_credential(std::env::var("API_KEY_QUERY").unwrap_or_else(|_| "api_key".to_owned()), token);"#),
        "{query_main}"
    );
    assert!(
        !generated
            .report
            .notes
            .iter()
            .any(|note| note.contains("api_key")),
        "{}",
        generated.report
    );
    // OAuth client credentials: the token URL is named where API_TOKEN is documented.
    assert!(
        main.contains("https://auth.shapes.example.com/token"),
        "{main}"
    );
}

#[test]
fn aws_signature_v4_and_http_basic_are_reported_with_what_to_do() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/");
    let read = |name: &str| std::fs::read_to_string(format!("{corpus}{name}")).unwrap();
    let generated = generate(
        &read("aws-codestar-connections-3.0.yaml"),
        &Options::default(),
    )
    .unwrap();
    let note = generated
        .report
        .notes
        .iter()
        .find(|note| note.contains("AWS Signature Version 4"))
        .unwrap_or_else(|| panic!("{}", generated.report));
    assert!(note.contains("signing proxy"), "{note}");
    // The generated README carries the report.
    assert!(
        generated
            .file("README.md")
            .unwrap()
            .contains("AWS Signature Version 4")
    );
    let generated = generate(&read("twilio-studio-v2-3.0.json"), &Options::default()).unwrap();
    assert!(
        generated.report.notes.iter().any(
            |note| note.contains("HTTP basic") && note.contains("API_KEY_HEADER=Authorization")
        ),
        "{}",
        generated.report
    );
    // A document without either says nothing of them.
    let (_, report) = lib_of(&shapes());
    assert!(
        !report
            .notes
            .iter()
            .any(|note| note.contains("Signature") || note.contains("HTTP basic")),
        "{report}"
    );
}

/// A store whose first reader answers counts, not orders, and users whose only reader without
/// an identifier logs in: the trial's petstore pointed a 404 at `get_inventory` and `login_user`.
fn store_api() -> serde_json::Value {
    let json_of = |schema: serde_json::Value| json!({"200": {"description": "ok", "content": {"application/json": {"schema": schema}}}});
    let order = json!({"$ref": "#/components/schemas/Order"});
    let user = json!({"$ref": "#/components/schemas/User"});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Store", "version": "1"},
        "paths": {
            "/store/inventory": {"get": {
                "operationId": "getInventory",
                "responses": json_of(json!({"type": "object", "additionalProperties": {"type": "integer"}}))
            }},
            "/store/orders": {"get": {
                "operationId": "listOrders",
                "responses": json_of(json!({"type": "array", "items": order}))
            }},
            "/store/orders/{orderId}": {"get": {
                "operationId": "getOrder",
                "parameters": [{"name": "orderId", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "responses": json_of(order)
            }},
            "/user/login": {"get": {
                "operationId": "loginUser",
                "responses": json_of(json!({"type": "string"}))
            }},
            "/user/{username}": {"get": {
                "operationId": "getUserByName",
                "parameters": [{"name": "username", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": json_of(user)
            }}
        },
        "components": {"schemas": {
            "Order": {"type": "object", "properties": {"id": {"type": "integer"}, "quantity": {"type": "integer"}}},
            "User": {"type": "object", "properties": {"username": {"type": "string"}, "email": {"type": "string"}}}
        }}
    })
}

#[test]
fn a_not_found_names_a_tool_that_lists_identifiers_or_none() {
    let (lib, _) = lib_of(&store_api());
    // The store's first reader answers counts: the lookup is the one that lists orders.
    let get_order = item(&lib, "pub async fn get_order(");
    assert!(
        get_order.contains(r#".map_err(|error| look_up_with(error, "store.list_orders"))"#),
        "{get_order}"
    );
    // Logging in lists no users: a user's 404 names no tool rather than that one.
    let get_user = item(&lib, "pub async fn get_user_by_name(");
    assert!(!get_user.contains("look_up_with"), "{get_user}");
    assert!(
        !lib.contains(r#"look_up_with(error, "store.get_inventory")"#),
        "{lib}"
    );
    assert!(
        !lib.contains(r#"look_up_with(error, "store.login_user")"#),
        "{lib}"
    );
}
