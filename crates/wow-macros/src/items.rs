//! Reading a derive's input: its enum's variants, their names and attributes.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, Variant};

/// One variant of a command or event enum, as the macros see it.
pub(crate) struct Item<'a> {
    pub(crate) ident: &'a Ident,
    pub(crate) has_payload: bool,
    pub(crate) payload: Option<&'a syn::Type>,
    pub(crate) name: String,
    pub(crate) kind: &'static str,
    pub(crate) validate: bool,
    pub(crate) internal: bool,
    pub(crate) deadline: bool,
    pub(crate) public: bool,
    pub(crate) revision: String,
}

pub(crate) fn variants<'a>(input: &'a DeriveInput, what: &str) -> syn::Result<Vec<&'a Variant>> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            format!("#[derive({what})] does not support generic enums"),
        ));
    }
    match &input.data {
        Data::Enum(data) => Ok(data.variants.iter().collect()),
        _ => Err(syn::Error::new_spanned(
            &input.ident,
            format!("#[derive({what})] works on enums only"),
        )),
    }
}

pub(crate) fn payload(variant: &Variant, what: &str) -> syn::Result<bool> {
    match &variant.fields {
        Fields::Unit => Ok(false),
        Fields::Unnamed(fields) if fields.unnamed.len() == 1 => Ok(true),
        _ => Err(syn::Error::new_spanned(
            variant,
            format!("a {what} variant is a unit or holds exactly one payload type"),
        )),
    }
}

pub(crate) fn snake_case(ident: &Ident) -> String {
    let mut out = String::new();
    for (index, c) in ident.to_string().chars().enumerate() {
        if c.is_uppercase() {
            if index > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn parse_items<'a>(
    input: &'a DeriveInput,
    what: &str,
    attr: &str,
) -> syn::Result<Vec<Item<'a>>> {
    let mut items = Vec::new();
    for variant in variants(input, what)? {
        let mut item = Item {
            ident: &variant.ident,
            has_payload: payload(variant, what)?,
            payload: match &variant.fields {
                Fields::Unnamed(fields) => fields.unnamed.first().map(|field| &field.ty),
                _ => None,
            },
            name: if attr == "command" {
                snake_case(&variant.ident)
            } else {
                variant.ident.to_string()
            },
            kind: "Normal",
            validate: false,
            internal: false,
            deadline: false,
            public: false,
            revision: "0.0.1".to_owned(),
        };
        for a in variant.attrs.iter().filter(|a| a.path().is_ident(attr)) {
            a.parse_nested_meta(|meta| {
                let key = meta
                    .path
                    .get_ident()
                    .map(Ident::to_string)
                    .unwrap_or_default();
                match (attr, key.as_str()) {
                    (_, "name") => item.name = meta.value()?.parse::<LitStr>()?.value(),
                    ("command", "create") => item.kind = "Create",
                    ("command", "allow_create") => item.kind = "AllowCreate",
                    ("command", "void") => item.kind = "Void",
                    ("command", "internal") => item.internal = true,
                    ("command", "deadline") => item.deadline = true,
                    ("command", "public") => item.public = true,
                    ("command", "validate") if item.has_payload => item.validate = true,
                    ("command", "validate") => {
                        return Err(meta.error("only a command with a payload can be validated"))
                    }
                    ("event", "revision") => {
                        item.revision = meta.value()?.parse::<LitStr>()?.value()
                    }
                    _ => return Err(meta.error(format!("unknown #[{attr}(...)] option"))),
                }
                Ok(())
            })?;
        }
        if items.iter().any(|other: &Item<'_>| other.name == item.name) {
            return Err(syn::Error::new_spanned(
                variant,
                format!("two variants are named `{}`", item.name),
            ));
        }
        items.push(item);
    }
    Ok(items)
}

pub(crate) fn pattern(item: &Item<'_>) -> TokenStream2 {
    let ident = item.ident;
    if item.has_payload {
        quote!(Self::#ident(payload))
    } else {
        quote!(Self::#ident)
    }
}

/// The match arms of each item's name, and the `to_body` and `from_body` methods, which a
/// command enum and an event enum implement alike.
pub(crate) fn name_and_body_arms(items: &[Item<'_>]) -> (Vec<TokenStream2>, TokenStream2) {
    let mut names = Vec::new();
    let mut to_body = Vec::new();
    let mut from_body = Vec::new();
    for item in items {
        let ident = item.ident;
        let name = &item.name;
        let pat = pattern(item);
        names.push(quote!(#pat => #name,));
        if item.has_payload {
            to_body.push(quote!(#pat => ::wow_core::__private::serde_json::to_value(payload),));
            from_body.push(quote!(#name => ::wow_core::__private::decode_payload(name, body).map(Self::#ident),));
        } else {
            to_body.push(
                quote!(#pat => ::std::result::Result::Ok(::wow_core::__private::unit_body()),),
            );
            from_body.push(quote!(#name => ::wow_core::__private::decode_unit(name, body).map(|()| Self::#ident),));
        }
    }
    let body_methods = quote! {
        fn to_body(&self) -> ::std::result::Result<::wow_core::__private::serde_json::Value, ::wow_core::__private::serde_json::Error> {
            match self { #(#to_body)* }
        }

        fn from_body(
            name: &str,
            body: &::wow_core::__private::serde_json::Value,
        ) -> ::std::result::Result<Self, ::wow_core::command::BodyDecodeError> {
            match name {
                #(#from_body)*
                other => ::std::result::Result::Err(::wow_core::command::BodyDecodeError::UnknownName(other.to_owned())),
            }
        }
    };
    (names, body_methods)
}
