//! Fusion
pub use fusion_macros::{ToolError, model, presenter, tool};
pub use fusion_runtime::*;

/// Used by generated code. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use core::option::Option::{self, None, Some};
    pub use core::result::Result::{self, Err, Ok};
    pub use std::{borrow::Cow, boxed::Box, string::String, vec::Vec};

    pub use ::schemars;
    pub use ::serde;
    pub use ::serde_json;

    pub use fusion_macros::__presenter_for_model;
    pub use fusion_runtime::args::kinds;
    pub use fusion_runtime::args::kinds::missing_argument;
    pub use fusion_runtime::model::{FieldAt, ModelsNeverImplementSerialize, profile};
    pub use fusion_runtime::present::{is_required, object_schema};
    pub use fusion_runtime::tool::{Call, HandlerResult};
    pub use fusion_runtime::{
        ArgumentGroup, CacheHint, ErrorCatalog, FieldInfo, Fillable, Model, Params, Plain,
        Presented, Presenter, Suggestion, Tool, ToolError, ToolSpec, UiBlock, Verb,
    };
}
