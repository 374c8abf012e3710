//! A Fusion connector with 50 tools over stdio: get, list, create, update and delete for ten
//! kinds of record of one domain (`--domain crm|ledger|helpdesk|inventory`). Four of them
//! mounted by a gateway make the 200-tool surface `bench/discovery.sh` measures in both
//! discovery modes. The tools answer with the record they were asked about: what is measured
//! is what they cost an agent to list and find, not what they do.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Parser;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use fusion::{CallContext, ServerBuilder, ToolError, ToolSpec};

#[derive(Debug, Parser)]
struct Args {
    /// The domain whose records the tools manage.
    #[arg(long, value_parser = ["crm", "ledger", "helpdesk", "inventory"])]
    domain: String,
}

/// The ten kinds of record of each domain.
fn records(domain: &str) -> [&'static str; 10] {
    match domain {
        "crm" => [
            "contact", "company", "deal", "lead", "note", "task", "meeting", "pipeline",
            "campaign", "segment",
        ],
        "ledger" => [
            "invoice",
            "payment",
            "refund",
            "credit_note",
            "tax_rate",
            "account",
            "journal_entry",
            "budget",
            "expense",
            "payout",
        ],
        "helpdesk" => [
            "ticket",
            "comment",
            "agent",
            "macro",
            "sla_policy",
            "tag",
            "article",
            "survey",
            "queue",
            "escalation",
        ],
        _ => [
            "product",
            "variant",
            "warehouse",
            "stock_level",
            "supplier",
            "purchase_order",
            "shipment",
            "return",
            "bin_location",
            "price_list",
        ],
    }
}

#[fusion::data(deserialize, schema)]
struct ById {
    /// The record's id.
    id: String,
}

#[fusion::data(deserialize, schema)]
struct ListArgs {
    /// Words the records must contain.
    query: Option<String>,
    /// The most records to return (default 20).
    limit: Option<u32>,
    /// Where the previous page ended.
    cursor: Option<String>,
}

#[fusion::data(deserialize, schema)]
struct CreateArgs {
    /// Its display name.
    name: String,
    /// Further fields, by name.
    attributes: Option<BTreeMap<String, String>>,
}

#[fusion::data(deserialize, schema)]
struct UpdateArgs {
    /// The record's id.
    id: String,
    /// Its new display name.
    name: Option<String>,
    /// Fields to change, by name.
    attributes: Option<BTreeMap<String, String>>,
}

/// A record of kind `record` with these fields.
fn answer(record: &'static str, fields: Value) -> Result<Value, ToolError> {
    let mut answer = json!({ "kind": record });
    if let (Some(answer), Value::Object(fields)) = (answer.as_object_mut(), fields) {
        answer.extend(fields);
    }
    Ok(answer)
}

fn tools(mut builder: ServerBuilder, domain: &str) -> ServerBuilder {
    for record in records(domain) {
        let words = record.replace('_', " ");
        builder = builder
            .tool_spec(
                ToolSpec::query(
                    format!("get_{record}"),
                    format!("Gets one {words} by id, with its fields and related ids."),
                )
                .handler(move |_: CallContext, args: ById| async move {
                    answer(record, json!({ "id": args.id }))
                }),
            )
            .tool_spec(
                ToolSpec::query(
                    format!("list_{record}s"),
                    format!(
                        "Lists {words}s, newest first, filtered by words; pages with `cursor`."
                    ),
                )
                .handler(move |_: CallContext, args: ListArgs| async move {
                    let ListArgs {
                        query,
                        limit,
                        cursor,
                    } = args;
                    let limit = limit.unwrap_or(20);
                    answer(
                        record,
                        json!({ "query": query, "limit": limit, "after": cursor, "items": [] }),
                    )
                }),
            )
            .tool_spec(
                ToolSpec::mutation(
                    format!("create_{record}"),
                    format!("Creates a {words} and returns it with its new id."),
                )
                .handler(move |_: CallContext, args: CreateArgs| async move {
                    answer(
                        record,
                        json!({ "id": "new", "name": args.name, "attributes": args.attributes }),
                    )
                }),
            )
            .tool_spec(
                ToolSpec::mutation(
                    format!("update_{record}"),
                    format!(
                        "Updates a {words}'s name or fields; fields left out keep their value."
                    ),
                )
                .handler(move |_: CallContext, args: UpdateArgs| async move {
                    answer(
                        record,
                        json!({ "id": args.id, "name": args.name, "attributes": args.attributes }),
                    )
                }),
            )
            .tool_spec(
                ToolSpec::mutation(
                    format!("delete_{record}"),
                    format!("Deletes a {words} for good."),
                )
                .with_destructive(true)
                .handler(move |_: CallContext, args: ById| async move {
                    answer(record, json!({ "id": args.id }))
                }),
            );
    }
    builder
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let server = match tools(
        ServerBuilder::new(args.domain.clone(), "1.0.0"),
        &args.domain,
    )
    .build()
    {
        Ok(server) => server,
        Err(error) => {
            eprintln!("many-tools: {error}");
            return ExitCode::FAILURE;
        }
    };
    match Mcp::new(server).serve_stdio_until_signal().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("many-tools: {error}");
            ExitCode::FAILURE
        }
    }
}
