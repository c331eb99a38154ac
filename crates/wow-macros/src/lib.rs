//! Derive macros for wow-rs: `Command` and `Event` for an aggregate's command and event enums,
//! and `DomainError` for its business-rule errors.
//!
//! They write the name tables and the JSON glue so that a team writes each command, event and
//! rule once, as a plain enum variant, and marks a create, allow-create, void or internal
//! command with one attribute. A payload that implements `validator::Validate` is validated
//! without one. The traits they implement live in `wow-core`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, Ident, LitStr, Variant};

/// Implements `wow_core::CommandBody` for an enum of commands.
///
/// Each variant is a unit (`Freeze`) or holds one payload (`Deposit(Deposit)`). Its name is the
/// variant's name in `snake_case` unless `#[command(name = "...")]` gives one. One attribute
/// each marks the kind and the validation: `#[command(create)]`, `#[command(allow_create)]`,
/// `#[command(void)]`, and `#[command(internal)]` marks a command that only sagas and processors send: it is not
/// routed over HTTP. `#[command(deadline)]` marks a command a deadline may fire (an
/// aggregate's `deadlines`, a saga's `schedule`): only such commands can be scheduled, and
/// they are internal too unless `#[command(deadline, public)]` says callers may also send it.
/// Every payload derives `schemars::JsonSchema`: its schema is the body's in OpenAPI.
///
/// A payload whose type implements `validator::Validate` (of the `validator` version wow-core
/// depends on) is validated before its command runs, with no attribute needed: forgetting one
/// cannot turn validation off.
/// `#[command(validate)]` is still accepted, and makes it a compile error if the payload
/// does not implement `Validate`.
///
/// It also answers `CommandBody::crate_build` with `wow_core::crate_build!()`, expanded in the
/// enum's crate: how that crate was compiled (whether an arithmetic overflow there panics or
/// wraps), which the service checks at start (SPEC PX-1).
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

/// Implements `wow_core::DomainError` and `wow_core::aggregate::DecodeDomainError` for an
/// enum of business-rule errors, and writes its kind enum.
///
/// Each variant's error code is its name (`InsufficientBalance`) unless
/// `#[domain_error(code = "...")]` names another; a framework code's name (`NotFound`,
/// `IllegalState`, ...) maps to that framework code. Two variants may not share a code.
///
/// For `enum AccountError` it also writes `enum AccountErrorKind` (same visibility), one
/// fieldless variant per error variant: what a saga matches when a step is rejected, told
/// from the error code alone. The variants' fields (named, tuple or none) must be
/// `Serialize + DeserializeOwned`: `detail` writes them as a JSON object and `decode` reads
/// them back, never guessing a missing one.
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
    deadline: bool,
    public: bool,
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

            // SPEC PX-1: measured here, in the domain's crate, with its own overflow checks.
            fn crate_build() -> ::std::option::Option<::wow_core::build::CrateBuild> {
                ::std::option::Option::Some(::wow_core::crate_build!())
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
    let vis = &input.vis;
    let kind_ident = Ident::new(&format!("{enum_ident}Kind"), enum_ident.span());
    let variants_out = domain_error_variants(input)?;
    let mut codes = Vec::new();
    let mut kind_variants = Vec::new();
    let mut kinds = Vec::new();
    let mut kind_ofs = Vec::new();
    let mut details = Vec::new();
    let mut decodes = Vec::new();
    for (variant, code) in &variants_out {
        let ident = &variant.ident;
        let doc = format!("The kind of [`{enum_ident}::{ident}`] (code `{code}`).");
        codes.push(quote!(Self::#ident { .. } => ::wow_core::__private::error_code(#code),));
        kind_variants.push(quote!(#[doc = #doc] #ident,));
        kinds.push(quote!(Self::#ident { .. } => #kind_ident::#ident,));
        kind_ofs.push(
            quote!(if *code == ::wow_core::__private::error_code(#code) {
                return ::std::option::Option::Some(#kind_ident::#ident);
            }),
        );
        let (detail, decode) = detail_arms(variant);
        details.push(detail);
        decodes.push(
            quote!(if *code == ::wow_core::__private::error_code(#code) {
                return #decode;
            }),
        );
    }
    let kind_doc = format!(
        "One fieldless value per variant of [`{enum_ident}`], told back from a rejection's error code alone (written by `#[derive(DomainError)]`)."
    );
    Ok(quote! {
        #[doc = #kind_doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #vis enum #kind_ident { #(#kind_variants)* }

        impl ::wow_core::aggregate::DomainError for #enum_ident {
            fn error_code(&self) -> ::wow_core::ErrorCode {
                match self { #(#codes)* }
            }

            fn detail(&self) -> ::wow_core::__private::serde_json::Map<::std::string::String, ::wow_core::__private::serde_json::Value> {
                #[allow(unused_mut)]
                let mut detail = ::wow_core::__private::serde_json::Map::new();
                match self { #(#details)* }
                detail
            }
        }

        impl ::wow_core::aggregate::DecodeDomainError for #enum_ident {
            type Kind = #kind_ident;

            fn kind(&self) -> #kind_ident {
                match self { #(#kinds)* }
            }

            fn kind_of(code: &::wow_core::ErrorCode) -> ::std::option::Option<#kind_ident> {
                #(#kind_ofs)*
                ::std::option::Option::None
            }

            #[allow(clippy::redundant_closure_call)]
            fn decode(
                code: &::wow_core::ErrorCode,
                detail: &::wow_core::__private::serde_json::Map<::std::string::String, ::wow_core::__private::serde_json::Value>,
            ) -> ::std::option::Option<Self> {
                let _ = detail;
                #(#decodes)*
                ::std::option::Option::None
            }
        }
    })
}

/// Every variant of a domain error with its code; two variants may not share a code.
fn domain_error_variants(input: &DeriveInput) -> syn::Result<Vec<(&Variant, String)>> {
    let mut variants_out = Vec::new();
    for variant in variants(input, "DomainError")? {
        let code = domain_error_code(variant)?;
        if variants_out
            .iter()
            .any(|(_, other): &(&Variant, String)| *other == code)
        {
            return Err(syn::Error::new_spanned(
                variant,
                format!("two variants have the error code `{code}`: a rejection could not be told back to one of them"),
            ));
        }
        variants_out.push((variant, code));
    }
    Ok(variants_out)
}

/// The code of one variant of a domain error: its name, or `#[domain_error(code = "...")]`.
fn domain_error_code(variant: &Variant) -> syn::Result<String> {
    let mut code = variant.ident.to_string();
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
                Err(meta.error("unknown #[domain_error(...)] option; expected `code = \"...\"`"))
            }
        })?;
    }
    Ok(code)
}

/// The arm writing one variant's fields into `detail` (keyed by field name, or by index for
/// a tuple variant), and the expression reading the variant back from `detail`.
fn detail_arms(variant: &Variant) -> (TokenStream2, TokenStream2) {
    let ident = &variant.ident;
    let keys: Vec<(TokenStream2, String)> = match &variant.fields {
        Fields::Unit => Vec::new(),
        Fields::Named(fields) => fields
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref())
            .map(|name| (quote!(#name), name.to_string()))
            .collect(),
        Fields::Unnamed(fields) => (0..fields.unnamed.len())
            .map(|index| {
                let index = syn::Index::from(index);
                let key = format!("{}", index.index);
                (quote!(#index), key)
            })
            .collect(),
    };
    let bind: Vec<Ident> = (0..keys.len())
        .map(|index| Ident::new(&format!("field_{index}"), Span::call_site()))
        .collect();
    let members: Vec<&TokenStream2> = keys.iter().map(|(member, _)| member).collect();
    let names: Vec<&String> = keys.iter().map(|(_, name)| name).collect();
    let write = quote! {
        #[allow(unused_variables)]
        Self::#ident { #(#members: #bind,)* .. } => {
            #(::wow_core::__private::detail_insert(&mut detail, #names, #bind);)*
        }
    };
    let read = quote! {
        (|| ::std::option::Option::Some(Self::#ident {
            #(#members: ::wow_core::__private::detail_field(detail, #names)?,)*
        }))()
    };
    (write, read)
}
