//! What may come in (SPEC M3, M4, T3, E2): fillable profiles, plain parameters, and precise
//! validation errors that never let bad input reach a handler.

mod common;

use common::*;
use fusion::testing::Tester;
use fusion::{ArgumentGroup, Create, Filter, Model, Update};
use schemars::JsonSchema;
use serde_json::{Value, json};

fn issues(result: &fusion::testing::TestResult) -> Vec<Value> {
    result.error()["details"]["issues"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_guarded_field_sent_by_an_agent_is_rejected_before_the_handler() {
    let server = server();
    let tester = Tester::new(server.clone());
    let runs = db(&server).runs();
    let result = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5, "tenant_id": "t_other"}),
        )
        .await;
    assert!(result.is_error());
    assert_eq!(result.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(
        issues(&result),
        [json!({
            "field": "tenant_id",
            "problem": "unknown field",
            "expected": "no such field; known fields: customer_id, memo, notify, total_cents",
            // `tenant_id` is a hidden field of the model: its value is never echoed, whoever
            // sent it (issue 23).
            "sent": "[hidden]",
        })]
    );
    assert_eq!(db(&server).runs(), runs, "the handler must not run");
}

#[tokio::test]
async fn every_invalid_field_is_named_with_what_was_sent_and_expected() {
    let tester = Tester::new(server());
    let result = tester
        .call(
            "billing.create_invoice",
            json!({"total_cents": "ten", "memo": 5, "notify": "yes"}),
        )
        .await;
    assert_eq!(result.error_code(), Some("VALIDATION_ERROR"));
    let issues = issues(&result);
    let by_field = |field: &str| issues.iter().find(|issue| issue["field"] == field).cloned();
    assert_eq!(
        by_field("customer_id").unwrap()["problem"],
        "missing required field"
    );
    assert_eq!(by_field("customer_id").unwrap()["sent"], Value::Null);
    let total = by_field("total_cents").unwrap();
    assert_eq!(total["problem"], "wrong type");
    assert_eq!(total["sent"], "\"ten\"");
    assert!(
        total["expected"].as_str().unwrap().starts_with("integer"),
        "{total}"
    );
    assert_eq!(by_field("memo").unwrap()["sent"], "5");
    assert_eq!(by_field("notify").unwrap()["sent"], "\"yes\"");
    assert_eq!(issues.len(), 4, "{issues:?}");
    let message = result.error()["message"].as_str().unwrap();
    for field in ["customer_id", "total_cents", "memo", "notify"] {
        assert!(message.contains(field), "{message}");
    }
    assert!(result.texts()[0].starts_with("<tool_error code=\"VALIDATION_ERROR\">"));
    assert!(!result.error()["recovery"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn enum_values_and_numeric_ranges_are_explained() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.list_invoices", json!({"status": "closed"}))
        .await;
    let issue = &issues(&result)[0];
    assert_eq!(issue["field"], "status");
    assert!(
        issue["expected"]
            .as_str()
            .unwrap()
            .contains("\"open\", \"paid\", \"voided\""),
        "{issue}"
    );
}

#[tokio::test]
async fn optional_parameters_and_profiles_may_be_omitted() {
    let tester = Tester::new(server());
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5}),
        )
        .await;
    assert!(!created.is_error(), "{}", created.raw_text());
    assert_eq!(created.data()["memo"], Value::Null);
    let with_notify = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5, "memo": "m", "notify": true}),
        )
        .await;
    assert_eq!(with_notify.data()["memo"], "m (notify: true)");
    let updated = tester
        .call("billing.update_invoice", json!({"id": "INV-2"}))
        .await;
    assert!(!updated.is_error());
    let missing_id = tester
        .call("billing.update_invoice", json!({"total_cents": 1}))
        .await;
    assert_eq!(missing_id.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(issues(&missing_id)[0]["field"], "id");
}

#[tokio::test]
async fn arguments_that_are_not_an_object_or_absent_are_handled() {
    let tester = Tester::new(server());
    let absent = tester
        .call_exposed("billing_get_invoice", Value::Null)
        .await
        .unwrap();
    assert_eq!(absent.error_code(), Some("VALIDATION_ERROR"));
    let health = tester
        .call_exposed("ops_health", Value::Null)
        .await
        .unwrap();
    assert!(!health.is_error());
}

#[test]
fn generated_input_types_never_contain_a_guarded_field() {
    fn fields<G: ArgumentGroup>() -> Vec<&'static str> {
        G::FIELDS.to_vec()
    }
    assert_eq!(
        fields::<Create<Invoice>>(),
        ["customer_id", "total_cents", "memo"]
    );
    assert_eq!(fields::<Update<Invoice>>(), ["total_cents", "memo"]);
    assert_eq!(fields::<Filter<Invoice>>(), ["status", "customer_id"]);
    let guarded: Vec<&str> = Invoice::FIELDS
        .iter()
        .filter(|field| field.guarded)
        .map(|field| field.name)
        .collect();
    assert_eq!(guarded, ["tenant_id"]);
    for schema in [
        schemars::schema_for!(InvoiceCreate),
        schemars::schema_for!(InvoiceUpdate),
        schemars::schema_for!(InvoiceFilter),
    ] {
        let schema = schema.to_value();
        assert!(schema["properties"].get("tenant_id").is_none());
        assert_eq!(schema["additionalProperties"], false);
    }
}

#[test]
fn input_types_deserialize_strictly_on_their_own() {
    let created: InvoiceCreate =
        serde_json::from_value(json!({"customer_id": "C", "total_cents": 1, "memo": null}))
            .unwrap();
    assert_eq!(created.total_cents, 1);
    assert!(serde_json::from_value::<InvoiceCreate>(json!({"customer_id": "C"})).is_err());
    assert!(
        serde_json::from_value::<InvoiceCreate>(
            json!({"customer_id": "C", "total_cents": 1, "tenant_id": "t"})
        )
        .is_err()
    );
    let update: InvoiceUpdate = serde_json::from_value(json!({})).unwrap();
    assert!(update.total_cents.is_none() && update.memo.is_none());
    let schema = serde_json::to_value(schemars::schema_for!(InvoiceCreate)).unwrap();
    // `memo` is an `Option`: it may be left out, as serde itself allows.
    assert_eq!(schema["required"], json!(["customer_id", "total_cents"]));
    assert_eq!(
        schema["properties"]["total_cents"]["description"],
        "Total in integer cents"
    );
    assert_eq!(
        <InvoiceFilter as JsonSchema>::schema_name(),
        "InvoiceFilter"
    );
}

#[test]
fn a_model_declares_its_casts_and_lists() {
    assert_eq!(Invoice::NAME, "Invoice");
    let field = |name: &str| {
        *Invoice::FIELDS
            .iter()
            .find(|field| field.name == name)
            .unwrap()
    };
    assert_eq!(field("id").label, Some("Invoice id, such as INV-7"));
    assert!(field("id").presentable());
    assert!(field("webhook_secret").hidden && !field("webhook_secret").presentable());
    assert_eq!(field("api_key").label, None);
    assert!(!field("api_key").presentable());
    assert!(field("tenant_id").guarded && field("tenant_id").hidden);
}

/// A model whose fields carry constraints, as schemars writes them on a type's fields.
#[fusion::model(fillable(create = [code, name, quantity, contact, tags], update = [name, quantity]))]
struct Item {
    #[cast("Stock code: three capital letters")]
    #[schemars(regex(pattern = "^[A-Z]{3}$"))]
    code: String,
    #[cast("Display name")]
    #[schemars(length(min = 1, max = 12))]
    name: String,
    #[cast("Quantity on hand")]
    #[schemars(range(min = 1, max = 100))]
    quantity: u32,
    #[cast("Who to ask")]
    #[schemars(email)]
    contact: String,
    #[cast("Labels")]
    #[schemars(length(max = 2))]
    tags: Vec<String>,
}

/// Adds an item.
#[fusion::tool(mutation, name = "stock.add", destructive = false)]
async fn add_item(item: fusion::Create<Item>) -> Result<String, fusion::ToolError> {
    Ok(item.code)
}

/// Renames an item.
#[fusion::tool(mutation, name = "stock.rename", destructive = false)]
async fn rename_item(
    code: String,
    changes: fusion::Update<Item>,
) -> Result<Option<String>, fusion::ToolError> {
    let _ = code;
    Ok(changes.name)
}

fn stock(exposition: fusion::Exposition) -> fusion::Server {
    fusion::ServerBuilder::new("stock", "1.0.0")
        .exposition(exposition)
        .tool::<add_item>()
        .tool::<rename_item>()
        .build()
        .unwrap()
}

/// Every constraint the input schema advertises is enforced before the handler runs, with a
/// `VALIDATION_ERROR` naming the field, what was sent and what was expected.
#[tokio::test]
async fn advertised_constraints_are_enforced_in_both_expositions() {
    let valid = json!({"code": "ABC", "name": "Bolt", "quantity": 5, "contact": "a@b.example", "tags": ["x"]});
    for exposition in [fusion::Exposition::Flat, fusion::Exposition::Grouped] {
        let server = stock(exposition);
        let schema = server.action("stock.add").unwrap().input_schema().clone();
        let properties = &schema["properties"];
        assert_eq!(properties["code"]["pattern"], "^[A-Z]{3}$");
        assert_eq!(properties["name"]["maxLength"], 12);
        assert_eq!(properties["quantity"]["maximum"], 100);
        assert_eq!(properties["contact"]["format"], "email");
        assert_eq!(properties["tags"]["maxItems"], 2);
        let tester = Tester::new(server);
        let ok = tester.call("stock.add", valid.clone()).await;
        assert_eq!(
            ok.data(),
            &json!("ABC"),
            "{exposition:?}: {}",
            ok.raw_text()
        );
        for (field, value) in [
            ("code", json!("abcd")),
            ("name", json!("")),
            ("name", json!("a name far too long")),
            ("quantity", json!(0)),
            ("quantity", json!(101)),
            ("contact", json!("not an address")),
            ("tags", json!(["a", "b", "c"])),
        ] {
            let mut arguments = valid.clone();
            arguments[field] = value.clone();
            let refused = tester.call("stock.add", arguments).await;
            assert_eq!(
                refused.error_code(),
                Some("VALIDATION_ERROR"),
                "{exposition:?} {field}={value}: {}",
                refused.raw_text()
            );
            let issue = &issues(&refused)[0];
            assert_eq!(issue["field"], field, "{exposition:?}: {issue}");
            assert!(issue["sent"].is_string(), "{issue}");
        }
        // In an update profile the constraint applies to a value that is sent, and an absent
        // value stays absent.
        let renamed = tester
            .call("stock.rename", json!({"code": "ABC", "name": "Nut"}))
            .await;
        assert_eq!(renamed.data(), &json!("Nut"));
        let unchanged = tester.call("stock.rename", json!({"code": "ABC"})).await;
        assert_eq!(unchanged.data(), &Value::Null);
        let too_long = tester
            .call(
                "stock.rename",
                json!({"code": "ABC", "name": "x".repeat(13)}),
            )
            .await;
        assert_eq!(too_long.error_code(), Some("VALIDATION_ERROR"));
    }
}

/// Finds items by a code.
#[fusion::tool(query, name = "stock.find")]
async fn find_items(
    /// A stock code.
    #[schemars(regex(pattern = "^[A-Z]{3}$"))]
    code: String,
    /// How many to return.
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
) -> Result<String, fusion::ToolError> {
    Ok(format!("{code}:{}", limit.unwrap_or(10)))
}

#[tokio::test]
async fn constraints_on_plain_arguments_are_advertised_and_enforced() {
    let server = fusion::ServerBuilder::new("stock", "1.0.0")
        .tool::<find_items>()
        .build()
        .unwrap();
    let schema = server.action("stock.find").unwrap().input_schema().clone();
    assert_eq!(schema["properties"]["code"]["pattern"], "^[A-Z]{3}$");
    assert_eq!(schema["properties"]["limit"]["maximum"], 50);
    assert_eq!(schema["properties"]["code"]["description"], "A stock code.");
    let tester = Tester::new(server);
    assert_eq!(
        tester
            .call("stock.find", json!({"code": "ABC"}))
            .await
            .data(),
        &json!("ABC:10")
    );
    for arguments in [
        json!({"code": "abc"}),
        json!({"code": "ABC", "limit": 0}),
        json!({"code": "ABC", "limit": 51}),
    ] {
        let refused = tester.call("stock.find", arguments.clone()).await;
        assert_eq!(
            refused.error_code(),
            Some("VALIDATION_ERROR"),
            "{arguments}: {}",
            refused.raw_text()
        );
    }
}

/// In `update` and `filter` profiles an absent field is `None`, and a sent one is `Some`,
/// `null` included when the field's type admits it: the schema says exactly that.
#[tokio::test]
async fn update_profiles_tell_absent_from_null() {
    let server = server();
    let schema = server
        .action("billing.update_invoice")
        .unwrap()
        .input_schema()
        .clone();
    // `memo` is `Option<String>`: null is allowed and means "clear it"; `total_cents` is not.
    assert_eq!(
        schema["properties"]["memo"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(schema["properties"]["total_cents"]["type"], "integer");
    let tester = Tester::new(server);
    let set = tester
        .call(
            "billing.update_invoice",
            json!({"id": "INV-1", "memo": "hello"}),
        )
        .await;
    assert_eq!(set.data()["memo"], "hello");
    let untouched = tester
        .call(
            "billing.update_invoice",
            json!({"id": "INV-1", "total_cents": 5}),
        )
        .await;
    assert_eq!(untouched.data()["memo"], "hello");
    let cleared = tester
        .call(
            "billing.update_invoice",
            json!({"id": "INV-1", "memo": null}),
        )
        .await;
    assert_eq!(
        cleared.data()["memo"],
        Value::Null,
        "{}",
        cleared.raw_text()
    );
    let refused = tester
        .call(
            "billing.update_invoice",
            json!({"id": "INV-1", "total_cents": null}),
        )
        .await;
    assert_eq!(refused.error_code(), Some("VALIDATION_ERROR"));
}

/// A note with bounded fields.
#[fusion::model(fillable(create = [title], update = [title]))]
pub struct Note {
    /// The title.
    #[cast("Title")]
    #[schemars(length(min = 1, max = 8))]
    pub title: String,
}

/// Saves a note.
#[fusion::tool(mutation, name = "notes.save")]
async fn save_note(
    note: Create<Note>,
    /// A short code.
    #[schemars(length(max = 4))]
    code: String,
    /// An optional tag.
    #[schemars(length(max = 3))]
    tag: Option<String>,
) -> Result<String, fusion::ToolError> {
    Ok(format!("{}:{code}:{tag:?}", note.title))
}

#[test]
fn schemars_constraints_on_model_fields_and_arguments_reach_the_input_schema() {
    let server = fusion::ServerBuilder::new("notes", "1")
        .tool::<save_note>()
        .build()
        .unwrap();
    let schema =
        Value::Object((*server.tool("notes_save").unwrap().definition().input_schema).clone());
    let properties = &schema["properties"];
    assert_eq!(properties["title"]["maxLength"], 8, "{schema:#}");
    assert_eq!(properties["title"]["minLength"], 1);
    assert_eq!(properties["title"]["description"], "Title");
    assert_eq!(properties["code"]["maxLength"], 4);
    assert_eq!(properties["code"]["description"], "A short code.");
    assert_eq!(properties["tag"]["maxLength"], 3);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| name.as_str().unwrap())
        .collect();
    assert!(
        required.contains(&"code") && !required.contains(&"tag"),
        "{required:?}"
    );
    // The update profile lists the field too, optional, with the same constraint.
    let update = schemars::SchemaGenerator::default().into_root_schema_for::<Update<Note>>();
    assert_eq!(update.as_value()["properties"]["title"]["maxLength"], 8);
}

/// A model whose fields are Rust keywords, written as raw identifiers.
#[fusion::model(fillable(create = [r#type, r#match], update = [r#match], filter = [r#type]))]
pub struct Rule {
    /// The id.
    #[cast("Rule id")]
    pub id: String,
    /// The kind.
    #[cast("What kind of rule")]
    pub r#type: String,
    /// The pattern.
    #[cast("The pattern it matches")]
    pub r#match: Option<String>,
}

/// Shows a rule through its keyword fields.
#[fusion::presenter(Rule, fields(id, r#type, r#match))]
#[derive(Debug)]
pub struct RuleView;

/// Creates a rule.
#[fusion::tool(mutation, name = "rules.create", returns = RuleView)]
async fn create_rule(rule: Create<Rule>) -> Result<Rule, fusion::ToolError> {
    Ok(Rule {
        id: "R-1".into(),
        r#type: rule.r#type,
        r#match: rule.r#match,
    })
}

/// Changes the pattern of the rules of one type.
#[fusion::tool(mutation, name = "rules.retype", returns = RuleView)]
async fn retype_rule(only: Filter<Rule>, change: Update<Rule>) -> Result<Rule, fusion::ToolError> {
    Ok(Rule {
        id: "R-2".into(),
        r#type: only.r#type.unwrap_or_default(),
        r#match: change.r#match.flatten(),
    })
}

#[tokio::test]
async fn raw_identifier_fields_are_plain_keys_in_and_out() {
    let server = fusion::ServerBuilder::new("rules", "1")
        .tool::<create_rule>()
        .tool::<retype_rule>()
        .build()
        .unwrap();
    let input = Value::Object(
        (*server
            .tool("rules_create")
            .unwrap()
            .definition()
            .input_schema)
            .clone(),
    );
    let keys: Vec<&String> = input["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["match", "type"], "{input:#}");
    assert_eq!(input["required"], json!(["type"]));
    let output = serde_json::to_string(
        &server
            .tool("rules_create")
            .unwrap()
            .definition()
            .output_schema,
    )
    .unwrap();
    assert!(!output.contains("r#"), "{output}");

    let tester = Tester::new(server);
    let created = tester
        .call("rules.create", json!({"type": "regex", "match": "^a"}))
        .await;
    assert!(!created.is_error(), "{}", created.raw_text());
    assert_eq!(
        created.data(),
        &json!({"id": "R-1", "type": "regex", "match": "^a"})
    );
    // The field's label is its description in the listed output schema, under its plain key;
    // it is not sent again with the answer.
    assert!(output.contains("What kind of rule"), "{output}");
    assert!(
        !created
            .rules()
            .iter()
            .any(|rule| rule.contains("What kind of rule")),
        "{:?}",
        created.rules()
    );
    let raw = tester
        .call("rules.create", json!({"r#type": "regex"}))
        .await;
    assert_eq!(
        raw.error_code(),
        Some("VALIDATION_ERROR"),
        "the raw spelling is not a key"
    );
    let retyped = tester
        .call("rules.retype", json!({"type": "glob", "match": "*.rs"}))
        .await;
    assert_eq!(
        retyped.data(),
        &json!({"id": "R-2", "type": "glob", "match": "*.rs"}),
        "{}",
        retyped.raw_text()
    );
}

/// Where to send a receipt: the rules across fields are the type's own schema.
#[derive(Debug, serde::Serialize, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "anyOf" = [{"required": ["phone"]}, {"required": ["email"]}],
    "if" = {"properties": {"channel": {"const": "sms"}}, "required": ["channel"]},
    "then" = {"required": ["phone"]}
))]
struct Recipient {
    channel: Option<String>,
    phone: Option<String>,
    email: Option<String>,
}

impl ArgumentGroup for Recipient {
    const FIELDS: &'static [&'static str] = &["channel", "phone", "email"];
}

/// Sends a receipt.
#[fusion::tool(action, name = "shop.send_receipt")]
async fn send_receipt(to: Recipient) -> Result<Recipient, fusion::ToolError> {
    Ok(to)
}

/// Sends a receipt, with a note beside the recipient.
#[fusion::tool(action, name = "shop.send_note")]
async fn send_note(to: Recipient, note: String) -> Result<String, fusion::ToolError> {
    Ok(format!("{note} ({to:?})"))
}

#[tokio::test]
async fn rules_across_the_fields_of_a_type_taken_whole_are_advertised_and_enforced() {
    let server = fusion::ServerBuilder::new("shop", "1.0.0")
        .tool::<send_receipt>()
        .tool::<send_note>()
        .build()
        .unwrap();
    let schema = serde_json::to_value(
        server
            .tool("shop_send_receipt")
            .unwrap()
            .definition()
            .input_schema
            .as_ref(),
    )
    .unwrap();
    assert_eq!(
        schema["anyOf"],
        json!([{"required": ["phone"]}, {"required": ["email"]}])
    );
    assert_eq!(schema["then"], json!({"required": ["phone"]}));
    assert_eq!(schema["additionalProperties"], false);
    // Next to another argument, the type's rules would not describe the arguments: left out.
    let note = serde_json::to_value(
        server
            .tool("shop_send_note")
            .unwrap()
            .definition()
            .input_schema
            .as_ref(),
    )
    .unwrap();
    assert!(
        note.get("anyOf").is_none() && note.get("if").is_none(),
        "{note}"
    );

    // Grouped, they hold in the action's branch.
    let grouped = fusion::ServerBuilder::new("shop", "1.0.0")
        .tool::<send_receipt>()
        .tool::<send_note>()
        .exposition(fusion::Exposition::Grouped)
        .build()
        .unwrap();
    let schema = serde_json::to_value(
        grouped
            .tool("shop")
            .unwrap()
            .definition()
            .input_schema
            .as_ref(),
    )
    .unwrap();
    let branch = schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|branch| branch["properties"]["action"]["const"] == "send_receipt")
        .unwrap();
    assert_eq!(branch["then"], json!({"required": ["phone"]}));

    let tester = Tester::new(server);
    let ok = tester
        .call("shop.send_receipt", json!({"email": "ann@example.com"}))
        .await;
    assert!(!ok.is_error(), "{:?}", ok.raw());
    assert_eq!(ok.data()["email"], "ann@example.com");
    for arguments in [
        // Neither a phone nor an e-mail address.
        json!({"channel": "email"}),
        // By SMS, without a phone.
        json!({"channel": "sms", "email": "ann@example.com"}),
    ] {
        let refused = tester.call("shop.send_receipt", arguments.clone()).await;
        assert_eq!(
            refused.error_code(),
            Some("VALIDATION_ERROR"),
            "{arguments}: {:?}",
            refused.raw()
        );
    }
}
