//! `#[model]`: casts, hidden and guarded fields, fillable profiles (SPEC M1–M4).

mod check;
mod expand;
mod parse;

use darling::Error;
use proc_macro2::TokenStream;
use quote::quote;
use syn::ItemStruct;

use crate::fallback;

pub(crate) use expand::{descriptor, strip_fusion_attrs};

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let Ok(item) = syn::parse2::<ItemStruct>(item.clone()) else {
        return fallback::not_a_struct(item);
    };
    // Every mistake is reported in one run, and what is valid is still generated, so that
    // presenters and tools over the model report their own mistakes too.
    let mut errors = Error::accumulator();
    let Some(mut model) = parse::parse(args, item.clone(), &mut errors) else {
        return fallback::model(errors.finish().err(), item);
    };
    check::check(&mut model, &mut errors);
    let generated = expand::model(&model);
    let errors = errors.finish().err().map(Error::write_errors);
    quote!(#errors #generated)
}
