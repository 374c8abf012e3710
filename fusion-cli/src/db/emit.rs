//! A database schema to a connector crate: a `#[model]` per table, presenters, paged query
//! tools with filters on indexed columns, and audited mutations with idempotency keys, all
//! scoped to the caller's tenant.
//!
//! What the generated code guarantees, table by table:
//! - a column named like a secret (`password`, `token`, `secret`, `api_key`, `hash`, …) is
//!   never selected: no query reads it, so no answer can hold it;
//! - the tenant column is `#[guarded]` and `#[hidden]` in the model, and every statement (read,
//!   insert, update, delete) binds it to the caller's tenant, taken from the verified
//!   principal: an agent can neither send it nor reach another tenant's rows;
//! - the create profile lists the columns the database does not fill itself (required when
//!   `NOT NULL`, optional when nullable), the update profile every other visible column, the
//!   filter profile the visible columns that lead an index;
//! - every change writes its audit record in its own transaction; creates take an optional
//!   idempotency key, replayed on a retry with the same arguments.

use std::fmt::Write as _;

use super::{Column, Kind, Options, Schema, Source, Table};
use crate::Failure;
use crate::new::{Files, Names};

/// What a column name contains when it holds a secret.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "hash",
    "salt",
    "private_key",
    "credential",
];

/// The tenant columns looked for when `--tenant-column` is not given.
const TENANT_COLUMNS: &[&str] = &["tenant_id", "org_id", "account_id"];

/// A generated crate's parts that differ from the vanilla one.
#[derive(Debug)]
pub(crate) struct Generated {
    pub(crate) files: Files,
    pub(crate) description: String,
    /// Lines for `[dependencies]`.
    pub(crate) dependencies: &'static str,
    /// The store's variables, for `--help`.
    pub(crate) env_usage: &'static str,
    /// What was generated and what was left out, for the person who ran the command.
    pub(crate) report: String,
}

/// One table as the connector serves it.
struct Plan<'a> {
    table: &'a Table,
    /// `Customer` (the model), `customer` (its tools).
    model: String,
    singular: String,
    key: &'a Column,
    tenant: Option<&'a Column>,
    /// Selected and shown, the key first.
    visible: Vec<&'a Column>,
    secret: Vec<&'a Column>,
    create: Vec<&'a Column>,
    update: Vec<&'a Column>,
    filter: Vec<&'a Column>,
    /// Whether an insert can fill every required column (a required secret cannot be).
    can_create: bool,
}

/// The SQL dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::Sqlite => format!("?{n}"),
        }
    }

    /// A column as selected: cast to the type its Rust field reads.
    fn select(self, column: &Column) -> String {
        let name = quote(&column.name);
        match (self, column.kind) {
            (_, Kind::Bool) => name,
            (Dialect::Postgres, Kind::Integer) => format!("CAST({name} AS bigint)"),
            (Dialect::Postgres, Kind::Real) => format!("CAST({name} AS double precision)"),
            (Dialect::Postgres, Kind::Text) => format!("CAST({name} AS text)"),
            (Dialect::Sqlite, Kind::Integer) => format!("CAST({name} AS INTEGER)"),
            (Dialect::Sqlite, Kind::Real) => format!("CAST({name} AS REAL)"),
            (Dialect::Sqlite, Kind::Text) => format!("CAST({name} AS TEXT)"),
        }
    }

    /// Parameter `n` as a value of `column`'s type.
    fn value(self, column: &Column, n: usize) -> String {
        match self {
            Dialect::Sqlite => self.param(n),
            Dialect::Postgres => {
                let wire = wire(column.kind);
                format!("CAST(CAST(${n} AS {wire}) AS {})", column.sql_type)
            }
        }
    }

    /// Parameter `n` as text (the tenant, a key read back).
    fn text(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => self.param(n),
            Dialect::Postgres => format!("CAST(${n} AS text)"),
        }
    }
}

/// The PostgreSQL type a value of `kind` travels as.
fn wire(kind: Kind) -> &'static str {
    match kind {
        Kind::Integer => "bigint",
        Kind::Real => "double precision",
        Kind::Bool => "boolean",
        Kind::Text => "text",
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

fn is_secret(column: &str) -> bool {
    let lower = column.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| lower.contains(word))
}

/// A Rust identifier for a SQL name (`Line Items` → `line_items`); `None` when nothing usable
/// is left.
fn ident(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() {
        return None;
    }
    let out = if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("t_{out}")
    } else {
        out
    };
    // Keywords a column name may be.
    Some(match out.as_str() {
        "type" | "match" | "ref" | "move" | "use" | "mod" | "fn" | "impl" | "loop" | "self"
        | "super" | "crate" | "where" | "async" | "await" | "static" | "const" | "enum"
        | "struct" | "trait" | "true" | "false" | "in" | "for" | "if" | "else" | "let"
        | "return" | "box" | "dyn" | "gen" | "abstract" | "final" | "override" | "yield" => {
            format!("r#{out}")
        }
        _ => out,
    })
}

fn singular(table: &str) -> String {
    if let Some(stem) = table.strip_suffix("ies") {
        format!("{stem}y")
    } else if table.ends_with("ss") || table.len() <= 3 {
        table.to_owned()
    } else if let Some(stem) = table.strip_suffix('s') {
        stem.to_owned()
    } else {
        table.to_owned()
    }
}

fn pascal(snake: &str) -> String {
    snake
        .trim_start_matches("r#")
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn rust_type(column: &Column) -> String {
    let base = match column.kind {
        Kind::Integer => "i64",
        Kind::Real => "f64",
        Kind::Bool => "bool",
        Kind::Text => "String",
    };
    if column.nullable {
        format!("Option<{base}>")
    } else {
        base.to_owned()
    }
}

fn field_name(column: &Column) -> String {
    ident(&column.name).expect("checked when planning")
}

/// The columns' field names, comma-separated (a profile's list).
fn field_list(columns: &[&Column]) -> String {
    columns
        .iter()
        .map(|column| field_name(column))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes the crate's files for `schema`.
pub(crate) fn emit(
    schema: &Schema,
    source: &Source,
    names_: &Names,
    options: &Options,
) -> Result<Generated, Failure> {
    let dialect = match source {
        Source::Postgres(_) => Dialect::Postgres,
        Source::Sqlite(_) => Dialect::Sqlite,
    };
    for wanted in &options.tables {
        if !schema.tables.iter().any(|table| &table.name == wanted) {
            let known: Vec<&str> = schema
                .tables
                .iter()
                .map(|table| table.name.as_str())
                .collect();
            return Err(Failure(format!(
                "--tables: the database has no table `{wanted}` (it has: {})",
                known.join(", ")
            )));
        }
    }
    let mut report = String::new();
    let mut plans = Vec::new();
    for table in &schema.tables {
        if !options.tables.is_empty() && !options.tables.contains(&table.name) {
            continue;
        }
        match plan(table, options) {
            Ok(plan) => plans.push(plan),
            Err(why) => {
                let _ = writeln!(report, "skipped table {}: {why}", table.name);
            }
        }
    }
    if plans.is_empty() {
        return Err(Failure(format!(
            "no table can be served:\n{}",
            report.trim_end()
        )));
    }
    let mut lib = String::new();
    lib_header(&mut lib, names_, &plans);
    for plan in &plans {
        let _ = writeln!(
            report,
            "table {}: model {}, tools {}; hidden: {}; tenant column: {}",
            plan.table.name,
            plan.model,
            tool_list(plan).join(", "),
            if plan.secret.is_empty() {
                "none".to_owned()
            } else {
                plan.secret
                    .iter()
                    .map(|column| column.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            plan.tenant
                .map_or("none: every caller sees every row", |column| column
                    .name
                    .as_str())
        );
        table_code(&mut lib, names_, plan, dialect);
    }
    builder_code(&mut lib, names_, &plans, dialect);
    let mut store = include_str!("../new/templates/store_common.rs").to_owned();
    let (dependencies, env_usage, what) = match dialect {
        Dialect::Postgres => {
            store.push_str(include_str!("../new/templates/store_postgres.rs"));
            (
                "tokio-postgres = { version = \"0.7\", default-features = false, features = [\"runtime\"] }\n\
                 deadpool-postgres = { version = \"0.14\", default-features = false, features = [\"rt_tokio_1\"] }\n",
                ", DATABASE_URL (the PostgreSQL database served)",
                "a PostgreSQL database",
            )
        }
        Dialect::Sqlite => {
            store.push_str(include_str!("../new/templates/store_sqlite.rs"));
            (
                "rusqlite = { version = \"0.43\", features = [\"bundled\"] }\n",
                ", DATABASE_PATH (the SQLite file served)",
                "a SQLite database",
            )
        }
    };
    let mut files = Files::default();
    files.add("src/lib.rs", lib);
    files.add("src/store.rs", store);
    files.add("tests/connector.rs", test_code(names_, &plans));
    let surface_db = match dialect {
        // Building the server connects to nothing: the pool connects on first use.
        Dialect::Postgres => "Db::lazy(\"postgres://surface@127.0.0.1:1/none\").expect(\"a pool\")",
        Dialect::Sqlite => "Db::open(\":memory:\").expect(\"an in-memory database\")",
    };
    files.add(
        "tests/lock.rs",
        names_.fill(&format!(
            "//! The reviewed surface: `FUSION_LOCK=update cargo test --test lock` writes `fusion.lock`;\n\
             //! `cargo test` fails when the served surface is not the reviewed one.\n\n\
             #[tokio::test]\nasync fn the_surface_is_the_reviewed_one() {{\n    \
             let server = __IDENT__::builder(__IDENT__::{surface_db}).build().expect(\"the server builds\");\n    \
             fusion::lock::check(&server, \"fusion.lock\");\n}}\n"
        )),
    );
    Ok(Generated {
        files,
        description: format!("An MCP connector in front of {what}, generated by cargo fusion new"),
        dependencies,
        env_usage,
        report,
    })
}

fn tool_list(plan: &Plan<'_>) -> Vec<String> {
    let mut tools = vec![
        format!("get_{}", plan.singular),
        format!("list_{}", ident(&plan.table.name).unwrap_or_default()),
    ];
    if plan.can_create {
        tools.push(format!("create_{}", plan.singular));
    }
    if !plan.update.is_empty() {
        tools.push(format!("update_{}", plan.singular));
    }
    tools.push(format!("delete_{}", plan.singular));
    tools
}

fn plan<'a>(table: &'a Table, options: &Options) -> Result<Plan<'a>, String> {
    let [key] = table.primary_key.as_slice() else {
        return Err(format!(
            "its primary key has {} columns: one is needed to get, update and delete a row",
            table.primary_key.len()
        ));
    };
    let braces = |name: &str| name.contains(['{', '}']);
    if braces(&table.name) || table.columns.iter().any(|column| braces(&column.name)) {
        return Err("a name holds `{` or `}`".into());
    }
    if ident(&table.name).is_none() {
        return Err("its name makes no Rust identifier".into());
    }
    for column in &table.columns {
        if ident(&column.name).is_none() {
            return Err(format!("column `{}` makes no Rust identifier", column.name));
        }
    }
    let key = table.column(key).ok_or("its primary key names no column")?;
    if is_secret(&key.name) {
        return Err(format!(
            "its primary key `{}` is named like a secret",
            key.name
        ));
    }
    let tenant = match &options.tenant_column {
        Some(name) => table.column(name),
        None => TENANT_COLUMNS.iter().find_map(|name| table.column(name)),
    };
    let secret: Vec<&Column> = table
        .columns
        .iter()
        .filter(|column| {
            is_secret(&column.name) && Some(column.name.as_str()) != tenant.map(|t| t.name.as_str())
        })
        .collect();
    let mut visible: Vec<&Column> = vec![key];
    visible.extend(table.columns.iter().filter(|column| {
        column.name != key.name
            && !secret.contains(column)
            && Some(column.name.as_str()) != tenant.map(|t| t.name.as_str())
    }));
    let create: Vec<&Column> = visible
        .iter()
        .copied()
        .filter(|column| !column.has_default)
        .collect();
    let can_create = secret
        .iter()
        .all(|column| column.nullable || column.has_default);
    let update: Vec<&Column> = visible.iter().copied().skip(1).collect();
    let filter: Vec<&Column> = visible
        .iter()
        .copied()
        .skip(1)
        .filter(|column| table.indexed.contains(&column.name))
        .collect();
    let singular = ident(&singular(&table.name)).expect("from an identifier");
    Ok(Plan {
        table,
        model: pascal(&singular),
        singular,
        key,
        tenant,
        visible,
        secret,
        create,
        update,
        filter,
        can_create,
    })
}

fn lib_header(out: &mut String, names: &Names, plans: &[Plan<'_>]) {
    let _ = writeln!(
        out,
        "//! The {} connector: the tables {} in front of AI agents, generated by `cargo fusion new`.\n\
         //!\n\
         //! Every statement is scoped to the caller's tenant (from the verified principal, never\n\
         //! from an agent); columns named like secrets are never read; every change is audited in\n\
         //! its own transaction. Edit freely: this is your code now.\n\n\
         pub mod store;\n\n\
         use fusion::{{AuditEntry, CallContext, Create, Filter, Hidden, Page, Principal, Provided, Router, \
         ServerBuilder, State, ToolError, Update, model, presenter, tool}};\n\n\
         pub use store::Db;\n\
         use store::{{Change, Changed, Idempotency, Value, field}};\n\n\
         /// The tenant a call acts for: from the verified principal, never from an agent.\n\
         #[derive(Debug, Clone, PartialEq, Eq)]\n\
         pub struct Tenant(pub String);\n\n\
         impl Provided for Tenant {{}}\n\n\
         /// The caller's tenant; a call without one is refused.\n\
         pub fn tenant_of(call: &CallContext) -> Result<Tenant, ToolError> {{\n    \
         call.principal()\n        .and_then(|principal| principal.tenant.clone())\n        \
         .map(Tenant)\n        .ok_or_else(|| ToolError::unauthorized(\"The caller's credential names no tenant.\"))\n}}\n\n\
         /// The principal of a caller acting for `tenant`.\n\
         pub fn principal_of(tenant: &str) -> Principal {{\n    \
         Principal::new(format!(\"tenant:{{tenant}}\")).with_tenant(tenant)\n}}\n\n\
         /// The longest idempotency key accepted, in characters (a UUID is 36).\n\
         pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;\n\n\
         fn not_found(what: &str, key: &impl std::fmt::Display, list: &str) -> ToolError {{\n    \
         ToolError::not_found(format!(\"No {{what}} {{}}.\", fusion::echo(&key.to_string(), 40)))\n        \
         .with_recovery(format!(\"Call `{{list}}` to find valid ids.\"))\n}}\n",
        names.name,
        plans
            .iter()
            .map(|plan| plan.table.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn table_code(out: &mut String, names: &Names, plan: &Plan<'_>, dialect: Dialect) {
    let prefix = &names.ident;
    let model = &plan.model;
    let one = &plan.singular;
    let many = ident(&plan.table.name).expect("planned");
    let table = quote(&plan.table.name);
    // The model.
    let mut profiles = Vec::new();
    if plan.can_create && !plan.create.is_empty() {
        profiles.push(format!("create = [{}]", field_list(&plan.create)));
    }
    if !plan.update.is_empty() {
        profiles.push(format!("update = [{}]", field_list(&plan.update)));
    }
    if !plan.filter.is_empty() {
        profiles.push(format!("filter = [{}]", field_list(&plan.filter)));
    }
    let profiles = if profiles.is_empty() {
        String::new()
    } else {
        format!("(fillable({}))", profiles.join(", "))
    };
    let _ = writeln!(
        out,
        "\n// ---------------------------------------------------------------------------------------------\n// Table {}\n",
        plan.table.name
    );
    let _ = write!(out, "/// A row of `{}`.", plan.table.name);
    if !plan.secret.is_empty() {
        let _ = write!(
            out,
            " Never read (named like secrets): {}.",
            plan.secret
                .iter()
                .map(|column| format!("`{}`", column.name))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        out,
        "\n#[model{profiles}]\n#[derive(Clone)]\npub struct {model} {{"
    );
    for column in &plan.visible {
        let mut cast = format!("{} ({}", column.name, column.sql_type.to_lowercase());
        if column.name == plan.key.name {
            cast.push_str(", the row's id");
        }
        if let Some(fk) = plan
            .table
            .foreign_keys
            .iter()
            .find(|fk| fk.column == column.name)
        {
            let _ = write!(cast, ", references {}.{}", fk.table, fk.references);
        }
        if column.nullable {
            cast.push_str(", may be null");
        }
        cast.push(')');
        let _ = writeln!(
            out,
            "    /// Column `{}`.\n    #[cast({cast:?})]\n    pub {}: {},",
            column.name,
            field_name(column),
            rust_type(column)
        );
    }
    if let Some(tenant) = plan.tenant {
        let _ = writeln!(
            out,
            "    /// Column `{}`: the tenant that owns the row, from the caller's credential, never sent.\n    \
             #[guarded]\n    #[hidden]\n    pub {}: Hidden<String>,",
            tenant.name,
            field_name(tenant)
        );
    }
    let _ = writeln!(out, "}}\n");
    // Reading a row.
    let mut selected: Vec<String> = plan
        .visible
        .iter()
        .map(|column| dialect.select(column))
        .collect();
    if let Some(tenant) = plan.tenant {
        selected.push(dialect.select(&Column {
            nullable: false,
            ..(*tenant).clone()
        }));
    }
    let columns = selected.join(", ");
    let _ = writeln!(
        out,
        "const {}_COLUMNS: &str = {columns:?};\n",
        one.to_uppercase()
    );
    let _ = writeln!(
        out,
        "fn {one}_from(row: Vec<Value>) -> Result<{model}, store::StoreError> {{\n    let mut row = row.into_iter();\n    Ok({model} {{"
    );
    for column in &plan.visible {
        let _ = writeln!(
            out,
            "        {}: field(&mut row, {:?})?,",
            field_name(column),
            column.name
        );
    }
    if let Some(tenant) = plan.tenant {
        let _ = writeln!(
            out,
            "        {}: Hidden::new(field(&mut row, {:?})?),",
            field_name(tenant),
            tenant.name
        );
    }
    let _ = writeln!(out, "    }})\n}}\n");
    // The tenant's condition: `AND "tenant_id" = <param n>`.
    let scope = |n: usize| -> String {
        plan.tenant.map_or(String::new(), |tenant| {
            format!(
                " AND {} = {}",
                quote(&tenant.name),
                dialect.value(tenant, n)
            )
        })
    };
    let tenant_param = if plan.tenant.is_some() {
        "params.push(Value::from(tenant.0.as_str()));"
    } else {
        "let _ = &tenant;"
    };
    let key_field = field_name(plan.key);
    let key_type = rust_type(&Column {
        nullable: false,
        ..plan.key.clone()
    });
    let key_arg = match plan.key.kind {
        Kind::Text => format!("    #[schemars(length(max = 256))]\n    {key_field}: {key_type},"),
        _ => format!("    {key_field}: {key_type},"),
    };
    let list_tool = format!("{prefix}.list_{many}");
    // Presenters.
    let shown = field_list(&plan.visible);
    let _ = writeln!(
        out,
        "/// One row of `{}`.\n#[presenter({model}, fields({shown}))]\n#[derive(Debug)]\npub struct {model}View;\n\n\
         /// Rows of `{}` in a list: at most 50 reach the agent.\n#[presenter({model}, fields({shown}), limit = 50)]\n#[derive(Debug)]\npub struct {model}List;\n",
        plan.table.name, plan.table.name
    );
    // get
    let _ = writeln!(
        out,
        "/// Gets one row of `{t}` by its `{k}` (`{list_tool}` finds them).\n\
         #[tool(query, name = \"{prefix}.get_{one}\", returns = {model}View, tags = [\"{many}\"])]\n\
         pub async fn get_{one}(\n    db: State<Db>,\n    tenant: Tenant,\n    /// The row's `{k}`.\n{key_arg}\n) -> Result<{model}, ToolError> {{\n    \
         let sql = format!({get_sql:?}, {ONE}_COLUMNS);\n    \
         let mut params = vec![Value::from({key_field}.clone())];\n    {tenant_param}\n    \
         let row = db.query(sql, params).await?.into_iter().next();\n    \
         match row {{\n        Some(row) => Ok({one}_from(row)?),\n        None => Err(not_found({t:?}, &{key_field}, \"{list_tool}\")),\n    }}\n}}\n",
        t = plan.table.name,
        k = plan.key.name,
        get_sql = format!(
            "SELECT {{}} FROM {table} WHERE {} = {}{}",
            quote(&plan.key.name),
            dialect.value(plan.key, 1),
            scope(2)
        ),
        ONE = one.to_uppercase(),
    );
    // list
    let filter_arg = if plan.filter.is_empty() {
        String::new()
    } else {
        format!("    filter: Filter<{model}>,\n")
    };
    let mut filters = String::new();
    for column in &plan.filter {
        let _ = writeln!(
            filters,
            "    if let Some(value) = filter.{f}.clone() {{\n        params.push(Value::from(value));\n        \
             conditions.push(format!(\"{q} = {{}}\", {value_fn}));\n    }}",
            f = field_name(column),
            q = quote(&column.name).replace('"', "\\\""),
            value_fn = match dialect {
                Dialect::Sqlite => "format!(\"?{}\", params.len())".to_owned(),
                Dialect::Postgres => {
                    let wire = wire(column.kind);
                    format!(
                        "format!(\"CAST(CAST(${{}} AS {wire}) AS {})\", params.len())",
                        column.sql_type
                    )
                }
            }
        );
    }
    let tenant_condition = match plan.tenant {
        Some(tenant) => format!(
            "    params.push(Value::from(tenant.0.as_str()));\n    conditions.push(format!(\"{} = {{}}\", {}));\n",
            quote(&tenant.name).replace('"', "\\\""),
            match dialect {
                Dialect::Sqlite => "format!(\"?{}\", params.len())".to_owned(),
                Dialect::Postgres => format!(
                    "format!(\"CAST(CAST(${{}} AS text) AS {})\", params.len())",
                    tenant.sql_type
                ),
            }
        ),
        None => "    let _ = &tenant;\n".to_owned(),
    };
    let (limit_p, offset_p) = match dialect {
        Dialect::Sqlite => (
            "format!(\"?{}\", params.len() + 1)",
            "format!(\"?{}\", params.len() + 2)",
        ),
        Dialect::Postgres => (
            "format!(\"CAST(${} AS bigint)\", params.len() + 1)",
            "format!(\"CAST(${} AS bigint)\", params.len() + 2)",
        ),
    };
    let _ = writeln!(
        out,
        "/// Lists rows of `{t}` in `{k}` order{filtered}.\n\
         #[tool(query, name = \"{list_tool}\", returns = {model}List, cache = volatile, tags = [\"{many}\"])]\n\
         pub async fn list_{many}(\n    db: State<Db>,\n    tenant: Tenant,\n{filter_arg}    \
         /// How many rows to return (default 20; at most 50 are shown).\n    limit: Option<u32>,\n    \
         /// How many matching rows to skip first (default 0).\n    offset: Option<u32>,\n) -> Result<Page<{model}>, ToolError> {{\n    \
         let mut params: Vec<Value> = Vec::new();\n    let mut conditions: Vec<String> = vec![\"1 = 1\".to_owned()];\n{tenant_condition}{filters}    \
         let condition = conditions.join(\" AND \");\n    \
         let (limit, offset) = (i64::from(limit.unwrap_or(20).min(50)), i64::from(offset.unwrap_or(0)));\n    \
         let total = db\n        .query(format!(\"SELECT COUNT(*) FROM {table} WHERE {{condition}}\"), params.clone())\n        .await?\n        \
         .into_iter()\n        .next()\n        .and_then(|row| row.into_iter().next())\n        .and_then(|count| <i64 as store::FromValue>::from_value(count))\n        .unwrap_or(0);\n    \
         let sql = format!(\n        \"SELECT {{}} FROM {table} WHERE {{condition}} ORDER BY {qk} LIMIT {{}} OFFSET {{}}\",\n        {ONE}_COLUMNS,\n        {limit_p},\n        {offset_p}\n    );\n    \
         params.extend([Value::from(limit), Value::from(offset)]);\n    \
         let rows = db.query(sql, params).await?;\n    \
         let items = rows.into_iter().map({one}_from).collect::<Result<Vec<_>, _>>()?;\n    \
         Ok(Page::new(items).with_total(total.max(0) as u64).at_offset(offset as u64))\n}}\n",
        t = plan.table.name,
        k = plan.key.name,
        qk = quote(&plan.key.name).replace('"', "\\\""),
        table = table.replace('"', "\\\""),
        ONE = one.to_uppercase(),
        filtered = if plan.filter.is_empty() {
            String::new()
        } else {
            format!(
                ", filtered on {}",
                plan.filter
                    .iter()
                    .map(|c| format!("`{}`", c.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    );
    let invalidates = format!("invalidates = [\"{prefix}.list_{many}\", \"{prefix}.get_{one}\"]");
    let change_tail = |kind: &str| -> String {
        format!(
            "    match db.change(change).await? {{\n        Changed::Row(row) | Changed::Replayed(row) => {{\n            audit.recorded();\n            Ok({one}_from(row)?)\n        }}\n        \
             Changed::KeyReused => Err(ToolError::conflict(\"This idempotency key was already used with other arguments; nothing was {kind}.\")\n            \
             .with_recovery(\"To retry the earlier call, send exactly its arguments with this key; otherwise make up a new key.\")),\n        \
             Changed::Nothing => Err(not_found({t:?}, &key_text, \"{list_tool}\")),\n    }}\n",
            t = plan.table.name
        )
    };
    // create
    if plan.can_create {
        let mut columns: Vec<String> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        let mut pushes = String::new();
        for column in &plan.create {
            columns.push(quote(&column.name));
            values.push(dialect.value(column, columns.len()));
            let _ = writeln!(
                pushes,
                "        Value::from(row.{}.clone()),",
                field_name(column)
            );
        }
        if let Some(tenant) = plan.tenant {
            columns.push(quote(&tenant.name));
            values.push(dialect.value(tenant, columns.len()));
            let _ = writeln!(pushes, "        Value::from(tenant.0.as_str()),");
        }
        let insert = if columns.is_empty() {
            format!("INSERT INTO {table} DEFAULT VALUES RETURNING {{}}")
        } else {
            format!(
                "INSERT INTO {table} ({}) VALUES ({}) RETURNING {{}}",
                columns.join(", "),
                values.join(", ")
            )
        };
        let replay = format!(
            "SELECT {{}} FROM {table} WHERE {} = {}{}",
            dialect.select(&Column {
                kind: Kind::Text,
                nullable: false,
                ..plan.key.clone()
            }),
            dialect.text(1),
            scope(2)
        );
        let row_arg = if plan.create.is_empty() {
            String::new()
        } else {
            format!("    row: Create<{model}>,\n")
        };
        let _ = writeln!(
            out,
            "/// Inserts a row into `{t}`.\n///\n/// Retrying: send the same `idempotency_key` (a UUID, say) with every attempt of one insert:\n\
             /// a retry whose earlier attempt went through returns that row instead of inserting another.\n\
             #[tool(mutation, name = \"{prefix}.create_{one}\", returns = {model}View, destructive = false, {invalidates}, tags = [\"{many}\"])]\n\
             pub async fn create_{one}(\n    db: State<Db>,\n    tenant: Tenant,\n    audit: AuditEntry,\n{row_arg}    \
             /// Your key for this insert, the same on every retry of it.\n    #[schemars(length(max = MAX_IDEMPOTENCY_KEY_CHARS))]\n    idempotency_key: Option<String>,\n) -> Result<{model}, ToolError> {{\n    \
             let params = vec![\n{pushes}    ];\n    \
             let request = fusion::audit::arguments_digest(&fusion::serde_json::Value::Array(\n        params.iter().map(|value| fusion::serde_json::Value::String(format!(\"{{value:?}}\"))).collect(),\n    ));\n    \
             let key_text = idempotency_key.clone().unwrap_or_default();\n    \
             let change = Change {{\n        sql: format!({insert:?}, {ONE}_COLUMNS),\n        params,\n        audit: audit.record(),\n        \
             idempotency: idempotency_key.map(|key| Idempotency {{\n            tenant: tenant.0.clone(),\n            tool: \"{prefix}.create_{one}\",\n            key,\n            request,\n            \
             replay_sql: format!({replay:?}, {ONE}_COLUMNS),\n        }}),\n    }};\n{tail}}}\n",
            t = plan.table.name,
            ONE = one.to_uppercase(),
            tail = change_tail("inserted"),
        );
    }
    // update
    if !plan.update.is_empty() {
        let mut sets = String::new();
        for column in &plan.update {
            let value_expr = match dialect {
                Dialect::Sqlite => "format!(\"?{}\", params.len())".to_owned(),
                Dialect::Postgres => {
                    let wire = wire(column.kind);
                    format!(
                        "format!(\"CAST(CAST(${{}} AS {wire}) AS {})\", params.len())",
                        column.sql_type
                    )
                }
            };
            let _ = writeln!(
                sets,
                "    if let Some(value) = changes.{f}.clone() {{\n        params.push(Value::from(value));\n        sets.push(format!(\"{q} = {{}}\", {value_expr}));\n    }}",
                f = field_name(column),
                q = quote(&column.name).replace('"', "\\\""),
            );
        }
        let scope_tail = |start: &str| -> String {
            let key_value = match dialect {
                Dialect::Sqlite => format!("format!(\"?{{}}\", {start})"),
                Dialect::Postgres => {
                    let wire = wire(plan.key.kind);
                    format!(
                        "format!(\"CAST(CAST(${{}} AS {wire}) AS {})\", {start})",
                        plan.key.sql_type
                    )
                }
            };
            let tenant_value = plan.tenant.map(|tenant| match dialect {
                Dialect::Sqlite => format!(
                    "format!(\" AND \\\"{}\\\" = ?{{}}\", {start} + 1)",
                    tenant.name
                ),
                Dialect::Postgres => format!(
                    "format!(\" AND \\\"{}\\\" = CAST(CAST(${{}} AS text) AS {})\", {start} + 1)",
                    tenant.name, tenant.sql_type
                ),
            });
            format!(
                "format!(\"{} = {{}}{{}}\", {key_value}, {})",
                quote(&plan.key.name).replace('"', "\\\""),
                tenant_value.unwrap_or_else(|| "\"\"".to_owned())
            )
        };
        let tenant_push = if plan.tenant.is_some() {
            "    params.push(Value::from(tenant.0.as_str()));\n"
        } else {
            "    let _ = &tenant;\n"
        };
        let _ = writeln!(
            out,
            "/// Changes a row of `{t}`: only the columns sent change.\n\
             #[tool(mutation, name = \"{prefix}.update_{one}\", returns = {model}View, idempotent, {invalidates}, tags = [\"{many}\"])]\n\
             pub async fn update_{one}(\n    db: State<Db>,\n    tenant: Tenant,\n    audit: AuditEntry,\n    /// The row's `{k}`.\n{key_arg}\n    changes: Update<{model}>,\n) -> Result<{model}, ToolError> {{\n    \
             let key_text = {key_field}.to_string();\n    let mut params: Vec<Value> = Vec::new();\n    let mut sets: Vec<String> = Vec::new();\n{sets}    \
             if sets.is_empty() {{\n        return get_{one}(db, tenant, {key_field}).await;\n    }}\n    \
             let condition = {cond};\n    params.push(Value::from({key_field}));\n{tenant_push}    \
             let change = Change {{\n        sql: format!(\"UPDATE {tq} SET {{}} WHERE {{condition}} RETURNING {{}}\", sets.join(\", \"), {ONE}_COLUMNS),\n        params,\n        audit: audit.record(),\n        idempotency: None,\n    }};\n{tail}}}\n",
            t = plan.table.name,
            k = plan.key.name,
            tq = table.replace('"', "\\\""),
            cond = scope_tail("params.len() + 1"),
            ONE = one.to_uppercase(),
            tail = change_tail("changed"),
        );
    }
    // delete
    let _ = writeln!(
        out,
        "/// Deletes a row of `{t}`; it answers with the row as it was.\n\
         #[tool(mutation, name = \"{prefix}.delete_{one}\", returns = {model}View, {invalidates}, tags = [\"{many}\"])]\n\
         pub async fn delete_{one}(\n    db: State<Db>,\n    tenant: Tenant,\n    audit: AuditEntry,\n    /// The row's `{k}`.\n{key_arg}\n) -> Result<{model}, ToolError> {{\n    \
         let key_text = {key_field}.to_string();\n    let mut params = vec![Value::from({key_field})];\n    {tenant_param}\n    \
         let change = Change {{\n        sql: format!(\"DELETE FROM {table} WHERE {qk} = {p1}{scope2} RETURNING {{}}\", {ONE}_COLUMNS),\n        params,\n        audit: audit.record(),\n        idempotency: None,\n    }};\n{tail}}}\n",
        t = plan.table.name,
        k = plan.key.name,
        table = table.replace('"', "\\\""),
        qk = quote(&plan.key.name).replace('"', "\\\""),
        p1 = dialect.value(plan.key, 1).replace('"', "\\\""),
        scope2 = scope(2).replace('"', "\\\""),
        ONE = one.to_uppercase(),
        tail = change_tail("deleted"),
    );
}

fn builder_code(out: &mut String, names: &Names, plans: &[Plan<'_>], dialect: Dialect) {
    let mut tools = String::new();
    for plan in plans {
        for tool in tool_list(plan) {
            let _ = writeln!(tools, "                .tool::<{tool}>()");
        }
    }
    let tables = plans
        .iter()
        .map(|plan| format!("`{}`", plan.table.name))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "\n/// The connector's tools over `db`.\npub fn builder(db: Db) -> ServerBuilder {{\n    \
         ServerBuilder::new({name:?}, env!(\"CARGO_PKG_VERSION\"))\n        \
         .instructions({instructions:?})\n        .state(db)\n        .provide(tenant_of)\n        \
         .router(\n            Router::new({ident:?})\n{tools}        )\n}}\n",
        name = names.name,
        ident = names.ident,
        instructions =
            format!("Rows of the tables {tables} of one tenant. List rows before changing them."),
    );
    let open = match dialect {
        Dialect::Postgres => {
            "let url = std::env::var(\"DATABASE_URL\").map_err(|_| \"set DATABASE_URL to the PostgreSQL database to serve\")?;\n    let db = Db::connect(&url).await?;"
        }
        Dialect::Sqlite => {
            "let path = std::env::var(\"DATABASE_PATH\").map_err(|_| \"set DATABASE_PATH to the SQLite file to serve\")?;\n    let db = Db::open(&path)?;"
        }
    };
    let _ = writeln!(
        out,
        "/// The server over the database the environment names.\npub async fn server_from_env() -> Result<fusion::Server, Box<dyn std::error::Error + Send + Sync>> {{\n    {open}\n    Ok(builder(db).build()?)\n}}"
    );
}

fn test_code(names: &Names, plans: &[Plan<'_>]) -> String {
    // What no answer may contain: the secret and tenant columns' names (their values are never
    // selected, so their names would be the only trace).
    let mut never: Vec<String> = Vec::new();
    for plan in plans {
        never.extend(
            plan.secret
                .iter()
                .map(|column| format!("\"{}\"", column.name)),
        );
        never.extend(plan.tenant.map(|column| format!("\"{}\"", column.name)));
    }
    never.sort();
    never.dedup();
    let never = never
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    names.fill(&format!(
        "//! The connector through Fusion's in-memory tester, against the database the environment\n\
         //! names (DATABASE_URL or DATABASE_PATH); skipped without one.\n\n\
         use fusion::testing::Tester;\nuse serde_json::json;\n\n\
         /// Columns that never reach an agent: secrets and the tenant.\n\
         const NEVER_SHOWN: &[&str] = &[{never}];\n\n\
         #[tokio::test]\nasync fn every_list_answers_without_hidden_columns() {{\n    \
         let Ok(server) = __IDENT__::server_from_env().await else {{\n        eprintln!(\"no database in the environment: skipped\");\n        return;\n    }};\n    \
         let tester = Tester::new(server).with_context(|call| {{\n        call.extensions_mut().insert(__IDENT__::principal_of(\"tenant-under-test\"));\n    }});\n    \
         let tools = tester.list_tools();\n    assert!(!tools.is_empty());\n    \
         for tool in tools.iter().filter(|tool| tool.name.contains(\"_list_\")) {{\n        \
         let listed = tester.call(&tool.name, json!({{}})).await;\n        assert!(!listed.is_error(), \"{{}}: {{}}\", tool.name, listed.raw_text());\n        \
         let text = listed.raw_text();\n        \
         for hidden in NEVER_SHOWN {{\n            assert!(!text.contains(hidden), \"{{}} shows {{hidden}}: {{text}}\", tool.name);\n        }}\n    }}\n}}\n\n\
         #[tokio::test]\nasync fn a_call_without_a_tenant_is_refused() {{\n    \
         let Ok(server) = __IDENT__::server_from_env().await else {{\n        return;\n    }};\n    \
         let tester = Tester::new(server);\n    \
         for tool in tester.list_tools().iter().filter(|tool| tool.name.contains(\"_list_\")) {{\n        \
         let refused = tester.call(&tool.name, json!({{}})).await;\n        assert!(refused.is_error(), \"{{}}: {{}}\", tool.name, refused.raw_text());\n    }}\n}}\n"
    ))
}
