//! `#[derive(Command)]`: `wow_core::CommandBody` for an enum of commands.

use crate::items::{name_and_body_arms, parse_items, pattern};
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{DeriveInput, Ident};

pub(crate) fn expand_command(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let items = parse_items(input, "Command", "command")?;
    let enum_ident = &input.ident;
    let (names, body_methods) = name_and_body_arms(&items);
    let infos = items.iter().map(|item| {
        let name = &item.name;
        let kind = Ident::new(item.kind, Span::call_site());
        let schema = match item.payload {
            Some(ty) => quote!(::wow_core::__private::schema_of::<#ty>),
            None => quote!(::wow_core::__private::unit_schema),
        };
        // A command a deadline fires is internal unless the domain says `public` (SPEC DM-6).
        let internal = item.internal || (item.deadline && !item.public);
        let deadline = item.deadline;
        quote!(::wow_core::command::CommandInfo { name: #name, kind: ::wow_core::command::CommandKind::#kind, internal: #internal, deadline: #deadline, schema: #schema })
    });
    // Every payload is validated when its type implements `validator::Validate`, whether or
    // not `#[command(validate)]` says so (autoref specialization picks the validating impl);
    // the attribute only asserts, at compile time, that the payload does implement it.
    let validations = items.iter().filter(|item| item.has_payload).map(|item| {
        let pat = pattern(item);
        quote!(#pat => (&::wow_core::__private::Payload(payload)).validate_payload(),)
    });
    let asserted = items
        .iter()
        .filter(|item| item.validate)
        .filter_map(|item| item.payload)
        .map(|ty| quote!(::wow_core::__private::assert_validate::<#ty>();));
    Ok(quote! {
        impl ::wow_core::command::CommandBody for #enum_ident {
            const COMMANDS: &'static [::wow_core::command::CommandInfo] = &[#(#infos),*];

            fn command_name(&self) -> &'static str {
                #[allow(unused_variables)]
                match self { #(#names)* }
            }

            fn validate(&self) -> ::std::result::Result<(), ::std::vec::Vec<::wow_core::command::BindingError>> {
                #[allow(unused_imports)]
                use ::wow_core::__private::{SkipValidation as _, RunValidation as _};
                #(#asserted)*
                #[allow(unreachable_patterns)]
                match self {
                    #(#validations)*
                    _ => ::std::result::Result::Ok(()),
                }
            }

            #body_methods

            // SPEC PX-1: measured here, in the domain's crate, with its own overflow checks.
            fn crate_build() -> ::std::option::Option<::wow_core::build::CrateBuild> {
                ::std::option::Option::Some(::wow_core::crate_build!())
            }
        }
    })
}
