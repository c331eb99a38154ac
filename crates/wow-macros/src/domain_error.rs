//! `#[derive(DomainError)]`: `wow_core::DomainError` for an enum of business-rule errors.

use crate::items::variants;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::quote;
use syn::{DeriveInput, Fields, Ident, LitStr, Variant};

pub(crate) fn expand_domain_error(input: &DeriveInput) -> syn::Result<TokenStream2> {
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
pub(crate) fn domain_error_variants(input: &DeriveInput) -> syn::Result<Vec<(&Variant, String)>> {
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
pub(crate) fn domain_error_code(variant: &Variant) -> syn::Result<String> {
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
pub(crate) fn detail_arms(variant: &Variant) -> (TokenStream2, TokenStream2) {
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
