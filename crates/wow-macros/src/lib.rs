//! Derive macros for wow-rs: `Command` and `Event` for an aggregate's command and event enums,
//! and `DomainError` for its business-rule errors.
//!
//! They write the name tables and the JSON glue so that a team writes each command, event and
//! rule once, as a plain enum variant, and marks a create, allow-create or void command or a
//! validated payload with one attribute. The traits they implement live in `wow-core`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Ident, LitStr, Variant};

/// Implements `wow_core::CommandBody` for an enum of commands.
///
/// Each variant is a unit (`Freeze`) or holds one payload (`Deposit(Deposit)`). Its name is the
/// variant's name in `snake_case` unless `#[command(name = "...")]` gives one. One attribute
/// each marks the kind and the validation: `#[command(create)]`, `#[command(allow_create)]`,
/// `#[command(void)]`, `#[command(validate)]` (the payload derives `validator::Validate`),
/// and `#[command(internal)]` marks a command that only sagas and processors send: it is not
/// routed over HTTP.
/// Every payload derives `schemars::JsonSchema`: its schema is the body's in OpenAPI.
#[proc_macro_derive(Command, attributes(command))]
pub fn derive_command(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_command(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `wow_core::EventBody` for an enum of events.
///
/// Each variant is a unit or holds one payload. Its name is the variant's name as written
/// unless `#[event(name = "...")]` gives one; its revision is `0.0.1` unless
/// `#[event(revision = "...")]` gives one.
#[proc_macro_derive(Event, attributes(event))]
pub fn derive_event(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_event(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `wow_core::DomainError` for an enum of business-rule errors.
///
/// Each variant's error code is its name (`InsufficientBalance`) unless
/// `#[domain_error(code = "...")]` names another; a framework code's name (`NotFound`,
/// `IllegalState`, ...) maps to that framework code.
#[proc_macro_derive(DomainError, attributes(domain_error))]
pub fn derive_domain_error(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand_domain_error(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// One variant of a command or event enum, as the macros see it.
struct Item<'a> {
    ident: &'a Ident,
    has_payload: bool,
    payload: Option<&'a syn::Type>,
    name: String,
    kind: &'static str,
    validate: bool,
    internal: bool,
    revision: String,
}

fn variants<'a>(input: &'a DeriveInput, what: &str) -> syn::Result<Vec<&'a Variant>> {
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

fn payload(variant: &Variant, what: &str) -> syn::Result<bool> {
    match &variant.fields {
        Fields::Unit => Ok(false),
        Fields::Unnamed(fields) if fields.unnamed.len() == 1 => Ok(true),
        _ => Err(syn::Error::new_spanned(
            variant,
            format!("a {what} variant is a unit or holds exactly one payload type"),
        )),
    }
}

fn snake_case(ident: &Ident) -> String {
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

fn parse_items<'a>(input: &'a DeriveInput, what: &str, attr: &str) -> syn::Result<Vec<Item<'a>>> {
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

fn pattern(item: &Item<'_>) -> TokenStream2 {
    let ident = item.ident;
    if item.has_payload {
        quote!(Self::#ident(payload))
    } else {
        quote!(Self::#ident)
    }
}

fn name_and_body_arms(
    items: &[Item<'_>],
) -> (Vec<TokenStream2>, Vec<TokenStream2>, Vec<TokenStream2>) {
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
    (names, to_body, from_body)
}

fn expand_command(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let items = parse_items(input, "Command", "command")?;
    let enum_ident = &input.ident;
    let (names, to_body, from_body) = name_and_body_arms(&items);
    let infos = items.iter().map(|item| {
        let name = &item.name;
        let kind = Ident::new(item.kind, Span::call_site());
        let schema = match item.payload {
            Some(ty) => quote!(::wow_core::__private::schema_of::<#ty>),
            None => quote!(::wow_core::__private::unit_schema),
        };
        let internal = item.internal;
        quote!(::wow_core::command::CommandInfo { name: #name, kind: ::wow_core::command::CommandKind::#kind, internal: #internal, schema: #schema })
    });
    let validations = items.iter().filter(|item| item.validate).map(|item| {
        let pat = pattern(item);
        quote!(#pat => ::wow_core::__private::validate(payload),)
    });
    Ok(quote! {
        impl ::wow_core::command::CommandBody for #enum_ident {
            const COMMANDS: &'static [::wow_core::command::CommandInfo] = &[#(#infos),*];

            fn command_name(&self) -> &'static str {
                #[allow(unused_variables)]
                match self { #(#names)* }
            }

            fn validate(&self) -> ::std::result::Result<(), ::std::vec::Vec<::wow_core::command::BindingError>> {
                #[allow(unreachable_patterns)]
                match self {
                    #(#validations)*
                    _ => ::std::result::Result::Ok(()),
                }
            }

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
        }
    })
}

fn expand_event(input: &DeriveInput) -> syn::Result<TokenStream2> {
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
    let (names, to_body, from_body) = name_and_body_arms(&items);
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
        }
    })
}

fn expand_domain_error(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let enum_ident = &input.ident;
    let mut arms = Vec::new();
    for variant in variants(input, "DomainError")? {
        let ident = &variant.ident;
        let mut code = ident.to_string();
        for a in variant
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("domain_error"))
        {
            a.parse_nested_meta(|meta| {
                if meta.path.is_ident("code") {
                    code = meta.value()?.parse::<LitStr>()?.value();
                    Ok(())
                } else {
                    Err(meta
                        .error("unknown #[domain_error(...)] option; expected `code = \"...\"`"))
                }
            })?;
        }
        arms.push(quote!(Self::#ident { .. } => ::wow_core::__private::error_code(#code),));
    }
    Ok(quote! {
        impl ::wow_core::aggregate::DomainError for #enum_ident {
            fn error_code(&self) -> ::wow_core::ErrorCode {
                match self { #(#arms)* }
            }
        }
    })
}
