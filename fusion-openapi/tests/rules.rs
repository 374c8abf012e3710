//! What the generator makes of each construct, on small documents written for the purpose
//! (the real documents are in `generated.rs`): hidden and read-only fields, identifiers,
//! routes, and every unsupported construct reported with its operation skipped.

use fusion_openapi::{Options, generate};
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
                "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}},
                "responses": {"204": {"description": "none"}}
            }},
            "/bulk": {"post": {
                "operationId": "postBulk",
                "requestBody": {"content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/User"}}}}},
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
                "responses": {"200": {"description": "ok", "content": {"text/csv": {"schema": {"type": "string"}}}}}
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
                "settings": {"type": "object", "properties": {"signingKey": {"type": "string"}}}
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
    // Nested data holding a secret-looking field is neither cast nor presented.
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
fn every_unsupported_construct_skips_its_operation_with_a_reason() {
    let (lib, report) = lib_of(&user_api());
    for (operation, reason) in [
        ("GET /pairs/{a}-{b}", "holds more than one parameter"),
        (
            "POST /forms",
            "`application/x-www-form-urlencoded`, not JSON",
        ),
        ("POST /bulk", "a JSON array or scalar"),
        ("GET /remote", "is not a local reference"),
        ("GET /signed", "the required header parameter `X-Signature`"),
        ("GET /either", "oneOf/anyOf"),
        ("GET /report", "not JSON"),
    ] {
        let why = skipped(&report, operation);
        assert!(why.contains(reason), "{operation}: {why}");
    }
    for tool in [
        "get_pair",
        "post_form",
        "post_bulk",
        "get_remote",
        "get_signed",
    ] {
        assert!(
            !lib.contains(&format!("fn {tool}(")),
            "{tool} was generated"
        );
    }
    assert_eq!(report.tools + report.skipped.len(), report.operations);
    assert_eq!(report.tools, 3);
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
    assert_eq!(written.report.tools, 3);
    for file in ["Cargo.toml", "src/lib.rs", "src/main.rs", "README.md"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    let printed = written.to_string();
    assert!(
        printed.contains("3 of 10 operations became tools"),
        "{printed}"
    );
    assert!(printed.contains("wrote users-mcp to"), "{printed}");
    let missing = fusion_openapi::run(&dir.join("nope.yaml"), &out, None, None).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}
