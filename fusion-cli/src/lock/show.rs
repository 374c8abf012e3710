//! `lock show`: a surface as tables a person reads: one row per action, then per resource and
//! per prompt.

use fusion_lock::{
    ActionEntry, Audit, Egress, Exposition, PromptEntry, ResourceEntry, Serialization, Surface,
};
use serde_json::Value;

/// The server's facts, then one row per action, per resource and per prompt.
pub(crate) fn table(surface: &Surface) -> String {
    let server = &surface.server;
    let mut facts = vec![
        format!("{} {}", server.name, server.version),
        match server.exposition {
            Exposition::Flat => "flat".to_owned(),
            Exposition::Grouped => "grouped".to_owned(),
        },
        if server.access_policy {
            "access policy".to_owned()
        } else {
            "no access policy".to_owned()
        },
        match server.audit {
            None => "no audit".to_owned(),
            Some(Audit::Required) => "audit required".to_owned(),
            Some(Audit::BestEffort) => "audit best effort".to_owned(),
        },
    ];
    if let Some(limit) = server.rate_limit {
        facts.push(format!("rate limit {}/{}", limit.max, millis(limit.per_ms)));
    }
    if let Some(budget) = &surface.tokens {
        let listed: u64 = budget.definitions.values().sum();
        facts.push(format!(
            "{listed} tokens listed ({}, risky past +{} %)",
            budget.tokenizer, budget.threshold_percent
        ));
    }
    let mut counts = vec![counted(surface.actions.len(), "action")];
    if !surface.resources.is_empty() {
        counts.push(counted(surface.resources.len(), "resource"));
    }
    if !surface.prompts.is_empty() {
        counts.push(counted(surface.prompts.len(), "prompt"));
    }
    let mut text = format!(
        "{}\n{}, surface {}\n\n",
        facts.join(" · "),
        counts.join(", "),
        surface.digest()
    );
    let mut header = [
        "ACTION",
        "VERB",
        "CALLED AS",
        "HINTS",
        "ARGUMENTS (* required)",
        "EGRESS",
        "INVALIDATES",
        "GUARDS",
    ]
    .map(str::to_owned)
    .to_vec();
    let answers = surface
        .tokens
        .as_ref()
        .filter(|budget| !budget.answers.is_empty())
        .map(|budget| &budget.answers);
    if surface.tokens.is_some() {
        header.push("TOKENS".to_owned());
    }
    if answers.is_some() {
        header.push("WORST ANSWER".to_owned());
    }
    let mut rows = vec![header];
    for (key, action) in &surface.actions {
        let mut row = vec![
            key.clone(),
            action.verb.as_str().to_owned(),
            action.exposure.to_string(),
            hints(action),
            arguments(&action.input_schema),
            egress(&action.egress, &action.output_schema),
            or_dash(action.state.invalidates.join(", ")),
            guards(action),
        ];
        if let Some(budget) = &surface.tokens {
            row.push(or_dash(
                budget
                    .definitions
                    .get(&action.exposure.tool)
                    .map(u64::to_string)
                    .unwrap_or_default(),
            ));
        }
        if let Some(answers) = answers {
            row.push(match answers.get(key) {
                Some(Some(tokens)) => tokens.to_string(),
                Some(None) => "unbounded".to_owned(),
                None => "-".to_owned(),
            });
        }
        rows.push(row);
    }
    text.push_str(&aligned(&rows));
    if !surface.resources.is_empty() {
        text.push('\n');
        text.push_str(&resources(&surface.resources));
    }
    if !surface.prompts.is_empty() {
        text.push('\n');
        text.push_str(&prompts(&surface.prompts));
    }
    text
}

/// `1 action`, `3 resources`.
fn counted(count: usize, what: &str) -> String {
    format!("{count} {what}{}", if count == 1 { "" } else { "s" })
}

/// One row per resource: where it is read, what it holds and what a read shows.
fn resources(resources: &std::collections::BTreeMap<String, ResourceEntry>) -> String {
    let mut rows = vec![
        ["RESOURCE", "URI", "MIME TYPE", "EGRESS", "CACHE", "TOOLSET"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for (key, resource) in resources {
        rows.push(vec![
            key.clone(),
            resource.uri.clone(),
            resource.mime_type.clone(),
            egress(&resource.egress, &resource.output_schema),
            resource
                .cache
                .map_or_else(|| "-".to_owned(), |cache| cache_name(cache).to_owned()),
            or_dash(resource.toolset.clone().unwrap_or_default()),
        ]);
    }
    aligned(&rows)
}

/// One row per prompt: the name a client gets it by, its arguments and the presenters whose
/// data it may carry.
fn prompts(prompts: &std::collections::BTreeMap<String, PromptEntry>) -> String {
    let mut rows = vec![
        [
            "PROMPT",
            "NAME",
            "ARGUMENTS (* required)",
            "PRESENTS",
            "TOOLSET",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for (key, prompt) in prompts {
        let arguments: Vec<String> = prompt
            .arguments
            .iter()
            .map(|(name, argument)| {
                if argument.required {
                    format!("{name}*")
                } else {
                    name.clone()
                }
            })
            .collect();
        let presenters: Vec<&str> = prompt.presenters.keys().map(String::as_str).collect();
        rows.push(vec![
            key.clone(),
            prompt.name.clone(),
            or_dash(arguments.join(", ")),
            or_dash(presenters.join(", ")),
            or_dash(prompt.toolset.clone().unwrap_or_default()),
        ]);
    }
    aligned(&rows)
}

fn cache_name(cache: fusion_lock::Cache) -> &'static str {
    match cache {
        fusion_lock::Cache::Immutable => "immutable",
        fusion_lock::Cache::Volatile => "volatile",
    }
}

fn hints(action: &ActionEntry) -> String {
    let annotations = &action.annotations;
    let mut hints = Vec::new();
    if annotations.is_read_only() {
        hints.push("read-only");
    }
    if annotations.is_destructive() && !annotations.is_read_only() {
        hints.push("destructive");
    }
    if annotations.is_idempotent() {
        hints.push("idempotent");
    }
    if annotations.open_world == Some(false) {
        hints.push("closed-world");
    }
    if let Some(cache) = action.state.cache {
        hints.push(cache_name(cache));
    }
    if action.asks_user {
        hints.push("asks-user");
    }
    match action.task {
        Some(fusion_lock::TaskSupport::Optional) => hints.push("task"),
        Some(fusion_lock::TaskSupport::Required) => hints.push("task-only"),
        None => {}
    }
    or_dash(hints.join(" "))
}

fn arguments(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|properties| properties.keys())
        .map(|name| {
            if required.contains(&name.as_str()) {
                format!("{name}*")
            } else {
                name.clone()
            }
        })
        .collect();
    or_dash(names.join(", "))
}

/// The presenter and its fields; its agent limit only where the result is a list (a limit cuts
/// nothing from a single item).
fn egress(egress: &Egress, data_schema: &Value) -> String {
    let Some(name) = &egress.presenter else {
        return "plain".into();
    };
    let fields = egress
        .presenters
        .get(name)
        .map(|presenter| {
            presenter
                .fields
                .iter()
                .map(|(field, presented)| match &presented.presenter {
                    Some(nested) => format!("{field}={nested}"),
                    None => field.clone(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let mut text = format!("{name}({fields})");
    if let Some(limit) = egress.applied_limit(data_schema) {
        text.push_str(&format!(" limit {limit}"));
    }
    if !egress.ui_kinds.is_empty() {
        text.push_str(&format!(" ui {}", egress.ui_kinds.join(",")));
    }
    if !egress.suggests.is_empty() {
        text.push_str(&format!(" suggests {}", egress.suggests.join(" ")));
    }
    text
}

fn guards(action: &ActionEntry) -> String {
    let guards = &action.guards;
    let mut parts = Vec::new();
    match &guards.serialization {
        Serialization::None => {}
        Serialization::PerAction => parts.push("serialized".to_owned()),
        Serialization::PerArgument(argument) => parts.push(format!("serialized by {argument}")),
    }
    if let Some(concurrency) = guards.concurrency {
        parts.push(format!(
            "{} at once +{} queued",
            concurrency.max_active, concurrency.max_queued
        ));
    }
    if let Some(bytes) = guards.max_bytes {
        parts.push(format!("{bytes} bytes"));
    }
    if let Some(tokens) = guards.max_tokens {
        parts.push(format!("{tokens} tokens"));
    }
    if let Some(timeout) = guards.timeout_ms {
        parts.push(format!("timeout {}", millis(timeout)));
    }
    if let Some(limit) = guards.rate_limit {
        parts.push(format!("{}/{}", limit.max, millis(limit.per_ms)));
    }
    if let Some(toolset) = &action.access.toolset {
        parts.push(format!("toolset {toolset}"));
    }
    or_dash(parts.join(", "))
}

fn millis(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn or_dash(text: String) -> String {
    if text.is_empty() { "-".into() } else { text }
}

/// Columns padded to their widest cell (in characters), two spaces apart.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if column + 1 < columns {
                let padding = widths[column] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', padding));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}
