//! Every row of the classification table, each proven by a change that triggers it (and only
//! it), on a small surface written as its lockfile would describe it.

use std::collections::BTreeSet;

use fusion_lock::{Class, Rule, Serialization, Surface, TaskSupport, diff};
use serde_json::{Value, json};

fn base() -> Surface {
    let item = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "id": {"type": "string", "description": "Item id"},
            "name": {"type": "string", "description": "Item name"},
            "owner": {"$ref": "#/$defs/OwnerView", "description": "Who owns it"},
            "status": {"$ref": "#/$defs/Status", "description": "Where it is"}
        },
        "required": ["id", "name", "owner", "status"]
    });
    let defs = json!({
        "OwnerView": {
            "type": "object",
            "additionalProperties": false,
            "properties": {"name": {"type": "string", "description": "Owner name"}},
            "required": ["name"]
        },
        "Status": {
            "description": "Where an item is.",
            "oneOf": [
                {"const": "new", "type": "string", "description": "Just made."},
                {"const": "sold", "type": "string", "description": "Gone."}
            ]
        }
    });
    let mut one = item.clone();
    one["$defs"] = defs.clone();
    let list = json!({"type": "array", "items": item, "maxItems": 50, "$defs": defs});
    let presenters = json!({
        "ItemView": {
            "model": "Item",
            "fields": {
                "id": {"label": "Item id", "presenter": null},
                "name": {"label": "Item name", "presenter": null},
                "owner": {"label": "Who owns it", "presenter": "OwnerView"},
                "status": {"label": "Where it is", "presenter": null}
            },
            "rules": ["Prices are cents."]
        },
        "OwnerView": {
            "model": "Owner",
            "fields": {"name": {"label": "Owner name", "presenter": null}},
            "rules": []
        }
    });
    let no_guards = json!({
        "serialization": "none", "concurrency": null, "max_bytes": null,
        "timeout_ms": null, "rate_limit": null
    });
    let query =
        json!({"read_only": true, "destructive": false, "idempotent": true, "open_world": null});
    let surface = json!({
        "server": {
            "name": "shop", "version": "1.0.0", "instructions": "Items of one shop.",
            "exposition": "flat", "access_policy": true, "audit": "required",
            "rate_limit": {"max": 100, "per_ms": 60000}
        },
        "actions": {
            "shop.get_item": {
                "verb": "query", "title": "Get item", "description": "Gets one item.",
                "version": null,
                "exposure": {"tool": "shop_get_item", "action": null},
                "annotations": query,
                "input_schema": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "id": {"type": "string", "maxLength": 32, "minLength": 1, "description": "The id"},
                        "verbose": {"type": ["boolean", "null"]},
                        "kind": {"$ref": "#/$defs/Kind"},
                        "count": {"type": "integer", "format": "uint32", "minimum": 0}
                    },
                    "required": ["id", "kind"],
                    "$defs": {"Kind": {"oneOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]}}
                },
                "output_schema": one,
                "egress": {"presenter": "ItemView", "presenters": presenters.clone(), "limit": null,
                           "suggests": ["shop.delete_item"], "ui_kinds": ["markdown", "table"]},
                "state": {"invalidates": [], "cache": null},
                "guards": no_guards,
                "access": {"toolset": null, "tags": ["items"]},
                "error_actions": ["shop.list_items"]
            },
            "shop.list_items": {
                "verb": "query", "title": null, "description": "Lists items.", "version": null,
                "exposure": {"tool": "shop_list_items", "action": null},
                "annotations": query,
                "input_schema": {"type": "object", "properties": {}, "additionalProperties": false},
                "output_schema": list,
                "egress": {"presenter": "ItemView", "presenters": presenters, "limit": 50,
                           "suggests": [], "ui_kinds": []},
                "state": {"invalidates": [], "cache": "volatile"},
                "guards": {"serialization": "none",
                           "concurrency": {"max_active": 16, "max_queued": 64, "retry_after_ms": 1000},
                           "max_bytes": 65536, "timeout_ms": null, "rate_limit": null},
                "access": {"toolset": null, "tags": []},
                "error_actions": []
            },
            "shop.delete_item": {
                "verb": "mutation", "title": null, "description": "Deletes an item.", "version": null,
                "exposure": {"tool": "shop_delete_item", "action": null},
                "annotations": {"read_only": false, "destructive": true, "idempotent": false, "open_world": null},
                "input_schema": {"type": "object", "properties": {"id": {"type": "string"}},
                                 "required": ["id"], "additionalProperties": false},
                "output_schema": {
                    "type": "object",
                    "properties": {
                        "deleted": {"type": "string"},
                        "at": {"type": ["string", "null"], "maxLength": 40},
                        "tags": {"type": "object", "additionalProperties": {"type": "string"}}
                    },
                    "required": ["deleted", "at"]
                },
                "egress": {"presenter": null, "presenters": {}, "limit": null, "suggests": [], "ui_kinds": []},
                "state": {"invalidates": ["shop.*"], "cache": null},
                "guards": {"serialization": {"per_argument": "id"}, "concurrency": null, "max_bytes": null,
                           "timeout_ms": 5000, "rate_limit": {"max": 10, "per_ms": 60000}},
                "access": {"toolset": "admin", "tags": []},
                "error_actions": []
            }
        }
    });
    serde_json::from_value(surface).expect("the base surface is a valid surface")
}

type Edit = fn(&mut Surface, &mut Surface);

/// A change of the surface (applied to the old or the new side) and the rules it must give.
struct Case {
    what: &'static str,
    edit: Edit,
    expected: &'static [Rule],
}

fn get<'s>(surface: &'s mut Surface, key: &str) -> &'s mut fusion_lock::ActionEntry {
    surface.actions.get_mut(key).expect("a base action")
}

fn input(surface: &mut Surface) -> &mut Value {
    &mut get(surface, "shop.get_item").input_schema
}

fn output(surface: &mut Surface) -> &mut Value {
    &mut get(surface, "shop.delete_item").output_schema
}

fn item_view(surface: &mut Surface) -> &mut fusion_lock::PresenterEntry {
    get(surface, "shop.get_item")
        .egress
        .presenters
        .get_mut("ItemView")
        .expect("the base presenter")
}

fn resource() -> fusion_lock::ResourceEntry {
    serde_json::from_value(json!({
        "uri": "shop://items/{id}", "title": null, "description": "One item.",
        "mime_type": "application/json", "cache": "volatile", "toolset": null,
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "output_schema": {"type": "object"},
        "egress": {"presenter": "ItemView", "presenters": {}, "limit": null, "suggests": [], "ui_kinds": []}
    }))
    .expect("a valid resource entry")
}

fn prompt() -> fusion_lock::PromptEntry {
    serde_json::from_value(json!({
        "name": "shop_review", "title": null, "description": "Review an item.", "toolset": null,
        "arguments": {"id": {"required": true, "description": "The item"}},
        "presenters": {}
    }))
    .expect("a valid prompt entry")
}

fn with_content(old: &mut Surface, new: &mut Surface) {
    for surface in [old, new] {
        surface.resources.insert("shop.item".into(), resource());
        surface.prompts.insert("shop.review".into(), prompt());
    }
}

const CASES: &[Case] = &[
    // Breaking
    Case {
        what: "an action removed",
        expected: &[Rule::ActionRemoved],
        edit: |_, new| {
            new.actions.remove("shop.list_items");
        },
    },
    Case {
        what: "an action renamed",
        expected: &[Rule::ActionRenamed],
        edit: |_, new| {
            let entry = new.actions.remove("shop.list_items").unwrap();
            new.actions.insert("shop.list_all".into(), entry);
        },
    },
    Case {
        what: "the exposed tool renamed",
        expected: &[Rule::ExposureChanged],
        edit: |_, new| get(new, "shop.get_item").exposure.tool = "get_item".into(),
    },
    Case {
        what: "grouped exposition",
        expected: &[Rule::ExpositionChanged],
        edit: |_, new| new.server.exposition = fusion_lock::Exposition::Grouped,
    },
    Case {
        what: "a required argument added",
        expected: &[Rule::RequiredArgumentAdded],
        edit: |_, new| {
            input(new)["properties"]["store"] = json!({"type": "string"});
            input(new)["required"] = json!(["id", "kind", "store"]);
        },
    },
    Case {
        what: "an argument removed",
        expected: &[Rule::ArgumentRemoved],
        edit: |_, new| {
            input(new)["properties"]
                .as_object_mut()
                .unwrap()
                .remove("verbose");
        },
    },
    Case {
        what: "an optional argument required",
        expected: &[Rule::ArgumentNowRequired],
        edit: |_, new| input(new)["required"] = json!(["id", "kind", "verbose"]),
    },
    Case {
        what: "an argument no longer nullable",
        expected: &[Rule::InputTypeNarrowed],
        edit: |_, new| input(new)["properties"]["verbose"]["type"] = json!("boolean"),
    },
    Case {
        what: "an enum value removed on input",
        expected: &[Rule::InputEnumValueRemoved],
        edit: |_, new| {
            input(new)["$defs"]["Kind"]["oneOf"]
                .as_array_mut()
                .unwrap()
                .pop();
        },
    },
    Case {
        what: "a maximum lowered",
        expected: &[Rule::InputConstraintTightened],
        edit: |_, new| input(new)["properties"]["id"]["maxLength"] = json!(16),
    },
    Case {
        what: "a pattern added",
        expected: &[Rule::InputConstraintTightened],
        edit: |_, new| input(new)["properties"]["id"]["pattern"] = json!("^INV-"),
    },
    Case {
        what: "an integer format narrowed",
        expected: &[Rule::InputConstraintTightened],
        edit: |_, new| input(new)["properties"]["count"]["format"] = json!("uint16"),
    },
    Case {
        what: "the arguments closed",
        expected: &[Rule::InputClosed],
        edit: |old, _| input(old)["additionalProperties"] = json!(true),
    },
    Case {
        what: "a query became a mutation",
        expected: &[Rule::QueryBecameWrite],
        edit: |_, new| get(new, "shop.list_items").verb = fusion_lock::Verb::Mutation,
    },
    Case {
        what: "readOnly flipped",
        expected: &[Rule::ReadOnlyFlipped],
        edit: |_, new| get(new, "shop.get_item").annotations.read_only = Some(false),
    },
    Case {
        what: "destructive flipped",
        expected: &[Rule::DestructiveFlipped],
        edit: |_, new| get(new, "shop.delete_item").annotations.destructive = Some(false),
    },
    Case {
        what: "destructive flipped by its default",
        expected: &[Rule::DestructiveFlipped],
        edit: |_, new| get(new, "shop.get_item").annotations.destructive = None,
    },
    Case {
        what: "a presenter field removed",
        expected: &[Rule::OutputFieldRemoved],
        edit: |_, new| {
            item_view(new).fields.remove("name");
            let schema = &mut get(new, "shop.get_item").output_schema;
            schema["properties"].as_object_mut().unwrap().remove("name");
            schema["required"] = json!(["id", "owner", "status"]);
        },
    },
    Case {
        what: "a plain output field removed",
        expected: &[Rule::OutputFieldRemoved],
        edit: |_, new| {
            output(new)["properties"]
                .as_object_mut()
                .unwrap()
                .remove("tags");
        },
    },
    Case {
        what: "an output field's type changed",
        expected: &[Rule::OutputTypeChanged],
        edit: |_, new| output(new)["properties"]["deleted"]["type"] = json!("integer"),
    },
    Case {
        what: "an output field made nullable",
        expected: &[Rule::OutputTypeChanged],
        edit: |_, new| output(new)["properties"]["deleted"]["type"] = json!(["string", "null"]),
    },
    Case {
        what: "an output field no longer required",
        expected: &[Rule::OutputFieldOptional],
        edit: |_, new| output(new)["required"] = json!(["deleted"]),
    },
    // Risky
    Case {
        what: "a presenter field added",
        expected: &[Rule::PresenterFieldAdded],
        edit: |old, _| {
            item_view(old).fields.remove("name");
            let schema = &mut get(old, "shop.get_item").output_schema;
            schema["properties"].as_object_mut().unwrap().remove("name");
            schema["required"] = json!(["id", "owner", "status"]);
        },
    },
    Case {
        what: "a nested presenter field added",
        expected: &[Rule::PresenterFieldAdded],
        edit: |_, new| {
            let owner = get(new, "shop.get_item")
                .egress
                .presenters
                .get_mut("OwnerView")
                .unwrap();
            owner.fields.insert(
                "email".into(),
                fusion_lock::PresentedField {
                    label: "Email".into(),
                    presenter: None,
                },
            );
            let schema = &mut get(new, "shop.get_item").output_schema["$defs"]["OwnerView"];
            schema["properties"]["email"] = json!({"type": "string", "description": "Email"});
            schema["required"] = json!(["name", "email"]);
        },
    },
    Case {
        what: "a plain output field added",
        expected: &[Rule::OutputFieldAdded],
        edit: |_, new| output(new)["properties"]["by"] = json!({"type": "string"}),
    },
    Case {
        what: "an output object opened",
        expected: &[Rule::OutputOpened],
        edit: |_, new| {
            get(new, "shop.get_item")
                .output_schema
                .as_object_mut()
                .unwrap()
                .remove("additionalProperties");
        },
    },
    Case {
        what: "an output enum value added",
        expected: &[Rule::OutputEnumValueAdded],
        edit: |_, new| {
            get(new, "shop.get_item").output_schema["$defs"]["Status"]["oneOf"]
                .as_array_mut()
                .unwrap()
                .push(json!({"const": "lost", "type": "string"}));
        },
    },
    Case {
        what: "a rule reworded",
        expected: &[Rule::RulesChanged, Rule::RulesChanged],
        edit: |_, new| item_view(new).rules = vec!["Prices are integer cents.".into()],
    },
    Case {
        what: "an agent limit raised",
        expected: &[Rule::LimitRaised],
        edit: |_, new| {
            get(new, "shop.list_items").egress.limit = Some(500);
            get(new, "shop.list_items").output_schema["maxItems"] = json!(500);
        },
    },
    Case {
        what: "an agent limit removed",
        expected: &[Rule::LimitRaised],
        edit: |_, new| {
            get(new, "shop.list_items").egress.limit = None;
            get(new, "shop.list_items")
                .output_schema
                .as_object_mut()
                .unwrap()
                .remove("maxItems");
        },
    },
    Case {
        what: "an egress budget raised",
        expected: &[Rule::BudgetRaised],
        edit: |_, new| get(new, "shop.list_items").guards.max_bytes = Some(1 << 20),
    },
    Case {
        what: "an egress budget removed",
        expected: &[Rule::BudgetRaised],
        edit: |_, new| get(new, "shop.list_items").guards.max_bytes = None,
    },
    Case {
        what: "serialization removed",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| get(new, "shop.delete_item").guards.serialization = Serialization::None,
    },
    Case {
        what: "serialized by another argument",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| {
            get(new, "shop.delete_item").guards.serialization =
                Serialization::PerArgument("sku".into())
        },
    },
    Case {
        what: "concurrency removed",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| get(new, "shop.list_items").guards.concurrency = None,
    },
    Case {
        what: "concurrency raised",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| {
            get(new, "shop.list_items")
                .guards
                .concurrency
                .as_mut()
                .unwrap()
                .max_active = 64
        },
    },
    Case {
        what: "a timeout removed",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| get(new, "shop.delete_item").guards.timeout_ms = None,
    },
    Case {
        what: "a rate limit that refills faster",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| {
            get(new, "shop.delete_item")
                .guards
                .rate_limit
                .as_mut()
                .unwrap()
                .per_ms = 1000
        },
    },
    Case {
        what: "the server's rate limit removed",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| new.server.rate_limit = None,
    },
    Case {
        what: "the access policy removed",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| new.server.access_policy = false,
    },
    Case {
        what: "audit made best effort",
        expected: &[Rule::GuardLoosened],
        edit: |_, new| new.server.audit = Some(fusion_lock::Audit::BestEffort),
    },
    Case {
        what: "an invalidation removed",
        expected: &[Rule::InvalidationRemoved],
        edit: |_, new| get(new, "shop.delete_item").state.invalidates.clear(),
    },
    Case {
        what: "a query declared immutable",
        expected: &[Rule::CacheImmutable],
        edit: |_, new| {
            get(new, "shop.list_items").state.cache = Some(fusion_lock::Cache::Immutable)
        },
    },
    Case {
        what: "a mutation became an action",
        expected: &[Rule::VerbChanged],
        edit: |_, new| get(new, "shop.delete_item").verb = fusion_lock::Verb::Action,
    },
    Case {
        what: "idempotent dropped",
        expected: &[Rule::IdempotencyDropped],
        edit: |_, new| get(new, "shop.get_item").annotations.idempotent = Some(false),
    },
    Case {
        what: "openWorld flipped",
        expected: &[Rule::OpenWorldChanged],
        edit: |_, new| get(new, "shop.get_item").annotations.open_world = Some(false),
    },
    Case {
        what: "moved out of a toolset",
        expected: &[Rule::ToolsetChanged],
        edit: |_, new| get(new, "shop.delete_item").access.toolset = None,
    },
    Case {
        what: "a required scope added",
        expected: &[Rule::ScopeAdded],
        edit: |_, new| get(new, "shop.delete_item").access.scopes = vec!["shop:admin".into()],
    },
    Case {
        what: "a required scope removed",
        expected: &[Rule::ScopeRemoved],
        edit: |old, _| get(old, "shop.delete_item").access.scopes = vec!["shop:admin".into()],
    },
    Case {
        what: "a tag removed",
        expected: &[Rule::TagsChanged],
        edit: |_, new| get(new, "shop.get_item").access.tags.clear(),
    },
    Case {
        what: "UI blocks rendered",
        expected: &[Rule::UiKindAdded],
        edit: |_, new| get(new, "shop.list_items").egress.ui_kinds = vec!["table".into()],
    },
    Case {
        what: "a kind of UI block added",
        expected: &[Rule::UiKindAdded],
        edit: |_, new| {
            get(new, "shop.get_item")
                .egress
                .ui_kinds
                .push("chart".into())
        },
    },
    Case {
        what: "a suggestion target added",
        expected: &[Rule::SuggestionAdded],
        edit: |_, new| {
            get(new, "shop.list_items")
                .egress
                .suggests
                .push("shop.delete_item".into())
        },
    },
    Case {
        what: "an error action added",
        expected: &[Rule::SuggestionAdded],
        edit: |_, new| {
            get(new, "shop.delete_item")
                .error_actions
                .push("shop.get_item".into())
        },
    },
    Case {
        what: "the server renamed",
        expected: &[Rule::ServerRenamed],
        edit: |_, new| new.server.name = "store".into(),
    },
    Case {
        what: "an argument's default changed",
        expected: &[Rule::SchemaKeywordChanged],
        edit: |_, new| input(new)["properties"]["verbose"]["default"] = json!(false),
    },
    Case {
        what: "an output constraint changed",
        expected: &[Rule::SchemaKeywordChanged],
        edit: |_, new| output(new)["properties"]["at"]["maxLength"] = json!(80),
    },
    Case {
        what: "an argument stated not to be a guarded field",
        expected: &[Rule::NotGuardedStated],
        edit: |_, new| {
            get(new, "shop.get_item")
                .not_guarded
                .insert("owner_id".into(), "the owner to look in".into());
        },
    },
    Case {
        what: "the reason of a statement reworded, on a resource",
        expected: &[Rule::NotGuardedStated],
        edit: |old, new| {
            with_content(old, new);
            for (surface, reason) in [(old, "a filter"), (new, "whose items to read")] {
                let resource = surface.resources.get_mut("shop.item").unwrap();
                resource
                    .not_guarded
                    .insert("owner_id".into(), reason.into());
            }
        },
    },
    // Safe
    Case {
        what: "an action added",
        expected: &[Rule::ActionAdded],
        edit: |old, _| {
            old.actions.remove("shop.list_items");
        },
    },
    Case {
        what: "an optional argument added",
        expected: &[Rule::OptionalArgumentAdded],
        edit: |_, new| input(new)["properties"]["note"] = json!({"type": ["string", "null"]}),
    },
    Case {
        what: "a required argument made optional",
        expected: &[Rule::ArgumentNowOptional],
        edit: |_, new| input(new)["required"] = json!(["id"]),
    },
    Case {
        what: "an argument made nullable",
        expected: &[Rule::InputTypeWidened],
        edit: |_, new| input(new)["properties"]["id"]["type"] = json!(["string", "null"]),
    },
    Case {
        what: "an integer argument takes any number",
        expected: &[Rule::InputTypeWidened],
        edit: |_, new| {
            input(new)["properties"]["count"] =
                json!({"type": "number", "minimum": 0, "format": "uint32"})
        },
    },
    Case {
        what: "an enum value added on input",
        expected: &[Rule::InputEnumValueAdded],
        edit: |_, new| {
            input(new)["$defs"]["Kind"]["oneOf"]
                .as_array_mut()
                .unwrap()
                .push(json!({"const": "c", "type": "string"}));
        },
    },
    Case {
        what: "a maximum raised",
        expected: &[Rule::InputConstraintLoosened],
        edit: |_, new| input(new)["properties"]["id"]["maxLength"] = json!(64),
    },
    Case {
        what: "a minimum removed",
        expected: &[Rule::InputConstraintLoosened],
        edit: |_, new| {
            input(new)["properties"]["id"]
                .as_object_mut()
                .unwrap()
                .remove("minLength");
        },
    },
    Case {
        what: "an integer format widened",
        expected: &[Rule::InputConstraintLoosened],
        edit: |_, new| input(new)["properties"]["count"]["format"] = json!("uint64"),
    },
    Case {
        what: "the arguments opened",
        expected: &[Rule::InputOpened],
        edit: |_, new| input(new)["additionalProperties"] = json!(true),
    },
    Case {
        what: "an output field never null",
        expected: &[Rule::OutputNarrowed],
        edit: |_, new| output(new)["properties"]["at"]["type"] = json!("string"),
    },
    Case {
        what: "an output enum value removed",
        expected: &[Rule::OutputNarrowed],
        edit: |_, new| {
            get(new, "shop.get_item").output_schema["$defs"]["Status"]["oneOf"]
                .as_array_mut()
                .unwrap()
                .pop();
        },
    },
    Case {
        what: "an output field always present",
        expected: &[Rule::OutputNarrowed],
        edit: |old, _| output(old)["required"] = json!(["deleted"]),
    },
    Case {
        what: "an agent limit lowered",
        expected: &[Rule::LimitLowered],
        edit: |_, new| {
            get(new, "shop.list_items").egress.limit = Some(10);
            get(new, "shop.list_items").output_schema["maxItems"] = json!(10);
        },
    },
    Case {
        what: "an egress budget lowered",
        expected: &[Rule::BudgetLowered],
        edit: |_, new| get(new, "shop.list_items").guards.max_bytes = Some(1024),
    },
    Case {
        what: "serialized per action",
        expected: &[Rule::GuardTightened],
        edit: |_, new| get(new, "shop.delete_item").guards.serialization = Serialization::PerAction,
    },
    Case {
        what: "a timeout added",
        expected: &[Rule::GuardTightened],
        edit: |_, new| get(new, "shop.get_item").guards.timeout_ms = Some(2000),
    },
    Case {
        what: "a rate limit lowered",
        expected: &[Rule::GuardTightened],
        edit: |_, new| {
            get(new, "shop.delete_item")
                .guards
                .rate_limit
                .as_mut()
                .unwrap()
                .max = 5
        },
    },
    Case {
        what: "audit added",
        expected: &[Rule::GuardTightened],
        edit: |old, _| old.server.audit = None,
    },
    Case {
        what: "an invalidation added",
        expected: &[Rule::InvalidationAdded],
        edit: |_, new| {
            get(new, "shop.delete_item")
                .state
                .invalidates
                .push("shop.get_item".into())
        },
    },
    Case {
        what: "a cache hint removed",
        expected: &[Rule::CacheChanged],
        edit: |_, new| get(new, "shop.list_items").state.cache = None,
    },
    Case {
        what: "idempotent declared",
        expected: &[Rule::IdempotencyAdded],
        edit: |_, new| get(new, "shop.delete_item").annotations.idempotent = Some(true),
    },
    Case {
        what: "UI blocks no longer rendered",
        expected: &[Rule::UiKindRemoved, Rule::UiKindRemoved],
        edit: |_, new| get(new, "shop.get_item").egress.ui_kinds.clear(),
    },
    Case {
        what: "a kind of UI block no longer rendered",
        expected: &[Rule::UiKindRemoved],
        edit: |_, new| {
            get(new, "shop.get_item")
                .egress
                .ui_kinds
                .retain(|kind| kind != "markdown")
        },
    },
    Case {
        what: "a suggestion target removed",
        expected: &[Rule::SuggestionRemoved],
        edit: |_, new| get(new, "shop.get_item").egress.suggests.clear(),
    },
    Case {
        what: "a statement withdrawn, on a prompt",
        expected: &[Rule::NotGuardedWithdrawn],
        edit: |old, new| {
            with_content(old, new);
            old.prompts
                .get_mut("shop.review")
                .unwrap()
                .not_guarded
                .insert("owner_id".into(), "whom to address".into());
        },
    },
    // Cosmetic
    Case {
        what: "a title reworded",
        expected: &[Rule::TitleChanged],
        edit: |_, new| get(new, "shop.get_item").title = Some("Get an item".into()),
    },
    Case {
        what: "a description reworded",
        expected: &[Rule::DescriptionChanged],
        edit: |_, new| get(new, "shop.get_item").description = "Gets an item by id.".into(),
    },
    Case {
        what: "an argument's description reworded",
        expected: &[Rule::DescriptionChanged],
        edit: |_, new| input(new)["properties"]["id"]["description"] = json!("The item id"),
    },
    Case {
        what: "an enum value's description reworded",
        expected: &[Rule::DescriptionChanged],
        edit: |_, new| {
            get(new, "shop.get_item").output_schema["$defs"]["Status"]["oneOf"][1]["description"] =
                json!("Sold.")
        },
    },
    Case {
        what: "a label reworded",
        expected: &[Rule::LabelChanged],
        edit: |_, new| {
            item_view(new).fields.get_mut("name").unwrap().label = "The item's name".into();
            get(new, "shop.get_item").output_schema["properties"]["name"]["description"] =
                json!("The item's name");
        },
    },
    Case {
        what: "the instructions reworded",
        expected: &[Rule::InstructionsChanged],
        edit: |_, new| new.server.instructions = Some("The items of a shop.".into()),
    },
    Case {
        what: "the server's version bumped",
        expected: &[Rule::VersionChanged],
        edit: |_, new| new.server.version = "1.1.0".into(),
    },
    Case {
        what: "an action's own version",
        expected: &[Rule::VersionChanged],
        edit: |_, new| get(new, "shop.get_item").version = Some("2".into()),
    },
    Case {
        what: "a presenter renamed",
        expected: &[Rule::PresenterRenamed],
        edit: |_, new| {
            let egress = &mut get(new, "shop.get_item").egress;
            let view = egress.presenters.remove("ItemView").unwrap();
            egress.presenters.insert("ItemDetail".into(), view);
            egress.presenter = Some("ItemDetail".into());
        },
    },
    Case {
        what: "required listed in another order",
        expected: &[Rule::FormOnly],
        edit: |_, new| output(new)["required"] = json!(["at", "deleted"]),
    },
    Case {
        what: "a definition renamed",
        expected: &[Rule::FormOnly],
        edit: |_, new| {
            let schema = input(new);
            let kind = schema["$defs"]
                .as_object_mut()
                .unwrap()
                .remove("Kind")
                .unwrap();
            schema["$defs"]["ItemKind"] = kind;
            schema["properties"]["kind"]["$ref"] = json!("#/$defs/ItemKind");
        },
    },
    // Resources and prompts
    Case {
        what: "a resource removed",
        expected: &[Rule::ResourceRemoved],
        edit: |old, _| {
            old.resources.insert("shop.item".into(), resource());
        },
    },
    Case {
        what: "a resource's MIME type changed",
        expected: &[Rule::ResourceMimeChanged],
        edit: |old, new| {
            with_content(old, new);
            new.resources.get_mut("shop.item").unwrap().mime_type = "text/plain".into();
        },
    },
    Case {
        what: "a prompt removed",
        expected: &[Rule::PromptRemoved],
        edit: |old, _| {
            old.prompts.insert("shop.review".into(), prompt());
        },
    },
    Case {
        what: "a required prompt argument added",
        expected: &[Rule::PromptArgumentBroken],
        edit: |old, new| {
            with_content(old, new);
            let argument = fusion_lock::PromptArgumentEntry {
                required: true,
                description: None,
            };
            new.prompts
                .get_mut("shop.review")
                .unwrap()
                .arguments
                .insert("why".into(), argument);
        },
    },
    Case {
        what: "a new resource",
        expected: &[Rule::ResourceAdded],
        edit: |_, new| {
            new.resources.insert("shop.item".into(), resource());
        },
    },
    Case {
        what: "a new prompt",
        expected: &[Rule::PromptAdded],
        edit: |_, new| {
            new.prompts.insert("shop.review".into(), prompt());
        },
    },
    Case {
        // A list read: an agent limit cuts it (on a single item it would cut nothing).
        what: "what a resource shows changed",
        expected: &[Rule::ContentEgressChanged],
        edit: |old, new| {
            with_content(old, new);
            for surface in [old, &mut *new] {
                surface
                    .resources
                    .get_mut("shop.item")
                    .unwrap()
                    .output_schema = json!({"type": "array", "items": {"type": "object"}});
            }
            new.resources.get_mut("shop.item").unwrap().egress.limit = Some(5);
        },
    },
    Case {
        what: "an agent limit on a tool that returns one item (it cuts nothing)",
        expected: &[],
        edit: |_, new| get(new, "shop.get_item").egress.limit = Some(20),
    },
    Case {
        what: "an agent limit on a resource that reads one item",
        expected: &[],
        edit: |old, new| {
            with_content(old, new);
            new.resources.get_mut("shop.item").unwrap().egress.limit = Some(5);
        },
    },
    Case {
        what: "a tool that now asks the user",
        expected: &[Rule::AsksUserAdded],
        edit: |_, new| get(new, "shop.delete_item").asks_user = true,
    },
    Case {
        what: "a tool that no longer asks the user",
        expected: &[Rule::AsksUserRemoved],
        edit: |old, _| get(old, "shop.delete_item").asks_user = true,
    },
    Case {
        what: "a tool that now runs as a task for clients that can have one",
        expected: &[Rule::TaskOffered],
        edit: |_, new| get(new, "shop.delete_item").task = Some(TaskSupport::Optional),
    },
    Case {
        what: "a tool that now runs only as a task",
        expected: &[Rule::TaskRequired],
        edit: |old, new| {
            get(old, "shop.delete_item").task = Some(TaskSupport::Optional);
            get(new, "shop.delete_item").task = Some(TaskSupport::Required);
        },
    },
    Case {
        what: "a tool that no longer runs only as a task",
        expected: &[Rule::TaskRelaxed],
        edit: |old, _| get(old, "shop.delete_item").task = Some(TaskSupport::Required),
    },
    Case {
        what: "an optional prompt argument added",
        expected: &[Rule::PromptArgumentRelaxed],
        edit: |old, new| {
            with_content(old, new);
            let argument = fusion_lock::PromptArgumentEntry {
                required: false,
                description: None,
            };
            new.prompts
                .get_mut("shop.review")
                .unwrap()
                .arguments
                .insert("why".into(), argument);
        },
    },
    // The token budget (its own cases, as the classes above do not order them).
    Case {
        what: "a definition grew past the token threshold",
        expected: &[Rule::TokensGrew],
        edit: |old, new| {
            old.tokens = Some(budget(10, 200));
            new.tokens = Some(budget(10, 221));
        },
    },
    Case {
        what: "a token budget recorded",
        expected: &[Rule::TokenBudgetSet],
        edit: |_, new| new.tokens = Some(budget(10, 200)),
    },
    Case {
        what: "a definition grew within the token threshold",
        expected: &[Rule::TokensChanged],
        edit: |old, new| {
            old.tokens = Some(budget(10, 200));
            new.tokens = Some(budget(10, 220));
        },
    },
    Case {
        what: "a surface measured without a tokenizer",
        expected: &[],
        edit: |old, _| old.tokens = Some(budget(10, 200)),
    },
];

/// A budget of one tool, `shop_get_item`, of `tokens` tokens.
fn budget(threshold_percent: u64, tokens: u64) -> fusion_lock::TokenBudget {
    fusion_lock::TokenBudget {
        tokenizer: "o200k_base".into(),
        threshold_percent,
        definitions: [("shop_get_item".to_owned(), tokens)].into(),
        answers: Default::default(),
    }
}

#[test]
fn every_case_gives_exactly_its_rules() {
    let mut failures = Vec::new();
    for case in CASES {
        let (mut old, mut new) = (base(), base());
        (case.edit)(&mut old, &mut new);
        let found: Vec<Rule> = diff(&old, &new)
            .changes()
            .iter()
            .map(|change| change.rule)
            .collect();
        if found != case.expected {
            failures.push(format!(
                "{}: expected {:?}, found {:?}\n{}",
                case.what,
                case.expected,
                found,
                diff(&old, &new)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_of_the_table_is_proven_by_a_case() {
    let proven: BTreeSet<Rule> = CASES
        .iter()
        .flat_map(|case| case.expected.iter().copied())
        .collect();
    let missing: Vec<&Rule> = Rule::ALL
        .iter()
        .filter(|rule| !proven.contains(rule))
        .collect();
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}

#[test]
fn the_same_surface_has_no_changes() {
    assert!(diff(&base(), &base()).is_empty());
    assert_eq!(diff(&base(), &base()).worst(), None);
}

#[test]
fn changes_come_most_serious_first_with_a_reason_each() {
    let old = base();
    let mut new = base();
    get(&mut new, "shop.get_item").title = Some("Get an item".into());
    get(&mut new, "shop.delete_item").annotations.destructive = Some(false);
    get(&mut new, "shop.list_items").guards.max_bytes = None;
    new.server.version = "2.0.0".into();
    let changes = diff(&old, &new);
    let classes: Vec<Class> = changes
        .changes()
        .iter()
        .map(|change| change.class())
        .collect();
    assert_eq!(
        classes,
        [
            Class::Breaking,
            Class::Risky,
            Class::Cosmetic,
            Class::Cosmetic
        ]
    );
    // The server's change before the actions' of the same class.
    assert_eq!(changes.changes()[2].subject, "server");
    assert_eq!(
        changes.summary(),
        "4 changes: 1 breaking, 1 risky, 2 cosmetic"
    );
    assert!(changes.fails(Class::Breaking));
    assert!(
        !diff(&old, &{
            let mut only_title = base();
            get(&mut only_title, "shop.get_item").title = None;
            only_title
        })
        .fails(Class::Safe)
    );
    for change in changes.changes() {
        assert!(
            !change.reason.is_empty() && !change.reason.contains('\n'),
            "{change}"
        );
    }
    let text = changes.to_text();
    assert!(
        text.contains("  breaking  shop.delete_item: `destructive` flipped from true to false\n"),
        "{text}"
    );
}

#[test]
fn a_reason_stays_on_one_line_and_short() {
    let old = base();
    let mut new = base();
    get(&mut new, "shop.get_item").description =
        format!("Line one.\nLine two | {}", "x".repeat(500));
    let changes = diff(&old, &new);
    let reason = &changes.changes()[0].reason;
    assert!(
        !reason.contains('\n') && reason.contains("\\n") && reason.len() < 200,
        "{reason}"
    );
    // A pipe would end a Markdown cell.
    assert!(
        changes.to_markdown().contains("Line two \\| "),
        "{}",
        changes.to_markdown()
    );
}

#[test]
fn json_output_names_class_rule_subject_and_reason() {
    let old = base();
    let mut new = base();
    get(&mut new, "shop.delete_item").annotations.destructive = Some(false);
    let json = diff(&old, &new).to_json();
    assert_eq!(json["changes"][0]["class"], "breaking");
    assert_eq!(json["changes"][0]["rule"], "destructive-flipped");
    assert_eq!(json["changes"][0]["subject"], "shop.delete_item");
    assert_eq!(
        json["counts"],
        json!({"breaking": 1, "risky": 0, "safe": 0, "cosmetic": 0})
    );
}

#[test]
fn recursive_definitions_are_compared_once() {
    let tree = |label: &str| {
        json!({
            "$defs": {"Node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string", "description": label},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
                "required": ["label", "children"]
            }},
            "$ref": "#/$defs/Node"
        })
    };
    let (mut old, mut new) = (base(), base());
    get(&mut old, "shop.delete_item").output_schema = tree("A label");
    get(&mut new, "shop.delete_item").output_schema = tree("The label");
    let changes = diff(&old, &new);
    assert_eq!(changes.changes().len(), 1, "{changes}");
    assert_eq!(changes.changes()[0].rule, Rule::DescriptionChanged);
    assert!(
        changes.changes()[0].reason.contains("output `data.label`"),
        "{changes}"
    );
}

#[test]
fn a_presenter_change_is_one_line_naming_everything_that_presents_with_it() {
    let (mut old, mut new) = (base(), base());
    with_content(&mut old, &mut new);
    for surface in [&mut old, &mut new] {
        let presenters = get(surface, "shop.get_item").egress.presenters.clone();
        surface
            .resources
            .get_mut("shop.item")
            .unwrap()
            .egress
            .presenters = presenters.clone();
        surface.prompts.get_mut("shop.review").unwrap().presenters = presenters;
    }
    let price = fusion_lock::PresentedField {
        label: "Price in cents".into(),
        presenter: None,
    };
    let mut widened = get(&mut new, "shop.get_item").egress.presenters.clone();
    let view = widened.get_mut("ItemView").unwrap();
    view.fields.insert("price".into(), price);
    for action in ["shop.get_item", "shop.list_items"] {
        get(&mut new, action).egress.presenters = widened.clone();
    }
    new.resources
        .get_mut("shop.item")
        .unwrap()
        .egress
        .presenters = widened.clone();
    new.prompts.get_mut("shop.review").unwrap().presenters = widened;

    let changes = diff(&old, &new);
    assert_eq!(
        changes
            .changes()
            .iter()
            .map(|change| change.rule)
            .collect::<Vec<_>>(),
        [Rule::PresenterFieldAdded; 4],
        "{changes}"
    );
    let text = changes.to_text();
    assert_eq!(
        text,
        "4 changes: 4 risky\n  risky     shop.get_item, shop.item, shop.list_items, shop.review: \
         egress widened: presenter `ItemView` lets `price` out\n"
    );
    assert_eq!(changes.grouped().len(), 1);
    assert!(
        changes
            .to_markdown()
            .contains("| `shop.get_item`, `shop.item`, `shop.list_items`, `shop.review` |"),
        "{}",
        changes.to_markdown()
    );
}
