//! Implementation detail of the `fusion` crate: use the macros through `fusion`, where they are
//! documented.
//!
//! Set `FUSION_MACROS_DEBUG=1` to print every expansion to stderr.

mod common;
mod data;
mod fallback;
mod model;
mod paths;
mod presenter;
mod surface;
mod tool;
mod tool_error;

use proc_macro::TokenStream;

fn debug(name: &str, output: proc_macro2::TokenStream) -> TokenStream {
    if std::env::var_os("FUSION_MACROS_DEBUG").is_some_and(|value| value == "1") {
        eprintln!("--- fusion: #[{name}] expansion ---\n{output}\n");
    }
    output.into()
}

/// See `fusion::model`.
#[proc_macro_attribute]
pub fn model(args: TokenStream, item: TokenStream) -> TokenStream {
    debug("model", model::expand(args.into(), item.into()))
}

/// See `fusion::presenter`.
#[proc_macro_attribute]
pub fn presenter(args: TokenStream, item: TokenStream) -> TokenStream {
    debug("presenter", presenter::expand(args.into(), item.into()))
}

/// Called back by a model's descriptor macro with the model's field facts.
#[doc(hidden)]
#[proc_macro]
pub fn __presenter_for_model(input: TokenStream) -> TokenStream {
    debug(
        "presenter (with model)",
        presenter::expand_callback(input.into()),
    )
}

/// See `fusion::tool`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    debug("tool", tool::expand(args.into(), item.into()))
}

/// See `fusion::resource`.
#[proc_macro_attribute]
pub fn resource(args: TokenStream, item: TokenStream) -> TokenStream {
    debug(
        "resource",
        surface::expand(surface::Kind::Resource, args.into(), item.into()),
    )
}

/// See `fusion::prompt`.
#[proc_macro_attribute]
pub fn prompt(args: TokenStream, item: TokenStream) -> TokenStream {
    debug(
        "prompt",
        surface::expand(surface::Kind::Prompt, args.into(), item.into()),
    )
}

/// See `fusion::data`.
#[proc_macro_attribute]
pub fn data(args: TokenStream, item: TokenStream) -> TokenStream {
    debug("data", data::expand(args.into(), item.into()))
}

/// See `fusion::ToolError`.
#[proc_macro_derive(ToolError, attributes(tool_error))]
pub fn derive_tool_error(input: TokenStream) -> TokenStream {
    debug("derive(ToolError)", tool_error::derive(input.into()))
}
