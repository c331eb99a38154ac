//! `#[derive(Event)]`: `wow_core::EventBody` for an enum of events.

use crate::items::{name_and_body_arms, parse_items, pattern};
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::DeriveInput;

pub(crate) fn expand_event(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let items = parse_items(input, "Event", "event")?;
    let enum_ident = &input.ident;
    if items.is_empty() {
        // An aggregate that records nothing (it takes only void commands).
        return Ok(quote! {
            impl ::wow_core::command::EventBody for #enum_ident {
                const EVENTS: &'static [&'static str] = &[];
                fn event_name(&self) -> &'static str { match *self {} }
                fn revision(&self) -> &'static str { match *self {} }
                fn to_body(&self) -> ::std::result::Result<::wow_core::__private::serde_json::Value, ::wow_core::__private::serde_json::Error> { match *self {} }
                fn from_body(
                    name: &str,
                    _body: &::wow_core::__private::serde_json::Value,
                ) -> ::std::result::Result<Self, ::wow_core::command::BodyDecodeError> {
                    ::std::result::Result::Err(::wow_core::command::BodyDecodeError::UnknownName(name.to_owned()))
                }
            }
        });
    }
    let (names, body_methods) = name_and_body_arms(&items);
    let all_names = items.iter().map(|item| &item.name);
    let revisions = items.iter().map(|item| {
        let pat = pattern(item);
        let revision = &item.revision;
        quote!(#pat => #revision,)
    });
    Ok(quote! {
        impl ::wow_core::command::EventBody for #enum_ident {
            const EVENTS: &'static [&'static str] = &[#(#all_names),*];

            fn event_name(&self) -> &'static str {
                #[allow(unused_variables)]
                match self { #(#names)* }
            }

            fn revision(&self) -> &'static str {
                #[allow(unused_variables)]
                match self { #(#revisions)* }
            }

            #body_methods
        }
    })
}
