//! `#[data]`: a connector's own argument and result types, derived through the facade.
//!
//! A type a handler takes or returns needs `Serialize`, `Deserialize` and `JsonSchema`, and
//! derives of those written in a crate that depends on `fusion` alone need
//! `#[serde(crate = …)]` and `#[schemars(crate = …)]` to find serde and schemars. This
//! attribute writes the derives and both paths, through `fusion::serde` and `fusion::schemars`,
//! so that the connector names neither crate.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::TokenStream;
use quote::quote;
use syn::{Item, spanned::Spanned};

use crate::paths::Krate;

/// `#[data]` derives all three; `#[data(serialize)]`, `#[data(deserialize)]` and
/// `#[data(schema)]` only the ones named (a result never read back needs no `Deserialize`).
#[derive(Default, FromMeta)]
struct Args {
    #[darling(default)]
    serialize: bool,
    #[darling(default)]
    deserialize: bool,
    #[darling(default)]
    schema: bool,
    #[darling(default, rename = "crate")]
    krate: Option<Krate>,
}

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(args, item.clone()) {
        Ok(output) => output,
        // The item stays, so that its other uses report nothing further.
        Err(error) => {
            let error = error.write_errors();
            quote!(#error #item)
        }
    }
}

fn try_expand(args: TokenStream, item: TokenStream) -> darling::Result<TokenStream> {
    let items = NestedMeta::parse_meta_list(args)?;
    let args = Args::from_list(&items)?;
    let parsed: Item = syn::parse2(item.clone())?;
    if !matches!(parsed, Item::Struct(_) | Item::Enum(_)) {
        return Err(Error::custom(
            "`#[data]` derives serde and schemars for a struct or an enum; put it on one",
        )
        .with_span(&item_keyword(&parsed)));
    }
    let krate = args.krate.unwrap_or_default();
    // The facade's public re-exports, as in `#[serde(crate = …)]` below: a note on an error in
    // derived code ("originates in the derive macro …") names a path the user can write.
    let facade = &krate.0;
    let all = !(args.serialize || args.deserialize || args.schema);
    let mut derives = Vec::new();
    if all || args.serialize {
        derives.push(quote!(#facade::serde::Serialize));
    }
    if all || args.deserialize {
        derives.push(quote!(#facade::serde::Deserialize));
    }
    if all || args.schema {
        derives.push(quote!(#facade::schemars::JsonSchema));
    }
    let serde_path = krate.serde_path();
    let schemars_path = krate.text_of("schemars");
    let serde_attr =
        (all || args.serialize || args.deserialize).then(|| quote!(#[serde(crate = #serde_path)]));
    let schemars_attr = (all || args.schema).then(|| quote!(#[schemars(crate = #schemars_path)]));
    Ok(quote! {
        #[derive(#(#derives),*)]
        #serde_attr
        #schemars_attr
        #item
    })
}

/// Where to point when the attribute is on the wrong kind of item: its first tokens.
fn item_keyword(item: &Item) -> proc_macro2::Span {
    match item {
        Item::Fn(function) => function.sig.fn_token.span,
        Item::Union(union) => union.union_token.span,
        Item::Type(alias) => alias.type_token.span,
        Item::Trait(item) => item.trait_token.span,
        Item::Impl(item) => item.impl_token.span,
        other => other.span(),
    }
}
