//! Demangling of symbol names: Rust (legacy and v0) through `rustc-demangle`
//! without the hash suffix, C++ (`_Z…`) through `cpp_demangle` in the style
//! of `__cxa_demangle` (parameter lists included); anything else unchanged.

/// Which demangling scheme to try, from DWARF's `DW_AT_language` when known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    Rust,
    Cpp,
    /// Unknown language: guess from the name.
    Unknown,
}

impl Lang {
    /// Maps a DWARF language code to the demangling scheme.
    pub(crate) fn from_dwarf(lang: Option<gimli::DwLang>) -> Lang {
        match lang {
            Some(gimli::DW_LANG_Rust) => Lang::Rust,
            Some(
                gimli::DW_LANG_C_plus_plus
                | gimli::DW_LANG_C_plus_plus_03
                | gimli::DW_LANG_C_plus_plus_11
                | gimli::DW_LANG_C_plus_plus_14
                | gimli::DW_LANG_C_plus_plus_17
                | gimli::DW_LANG_C_plus_plus_20,
            ) => Lang::Cpp,
            _ => Lang::Unknown,
        }
    }
}

/// Demangles `name`, guessing the scheme from the name itself.
pub(crate) fn demangle(name: &str) -> String {
    demangle_as(name, Lang::Unknown)
}

/// Demangles `name` with the scheme of `lang` (or a guess when unknown).
/// Returns the name unchanged when it is not mangled or demangling fails.
pub(crate) fn demangle_as(name: &str, lang: Lang) -> String {
    let out = match lang {
        Lang::Rust => rust(name),
        Lang::Cpp => cpp(name),
        Lang::Unknown => {
            if name.starts_with("_R") {
                rust(name)
            } else if name.starts_with("_Z") || name.starts_with("__Z") {
                // A Rust legacy symbol is a valid Itanium name too; the
                // Rust reading is preferred when it carries Rust's hash.
                if is_rust_legacy(name) {
                    rust(name).or_else(|| cpp(name))
                } else {
                    cpp(name).or_else(|| rust(name))
                }
            } else {
                None
            }
        }
    };
    out.unwrap_or_else(|| name.to_string())
}

fn rust(name: &str) -> Option<String> {
    rustc_demangle::try_demangle(name)
        .ok()
        .map(|d| format!("{d:#}"))
}

fn cpp(name: &str) -> Option<String> {
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    sym.demangle().ok()
}

/// True when `name` looks like `_ZN…17h<16 hex digits>E` (Rust legacy
/// mangling, whose last path component is the hash), possibly followed by a
/// `.llvm.…`-style suffix.
fn is_rust_legacy(name: &str) -> bool {
    let body = name.split('.').next().unwrap_or(name).as_bytes();
    let Some(body) = body.strip_suffix(b"E") else {
        return false;
    };
    if body.len() < 20 {
        return false;
    }
    let (head, hash) = body.split_at(body.len() - 17);
    head.ends_with(b"17") && hash[0] == b'h' && hash[1..].iter().all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_without_hash() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(
            demangle("_ZN3foo3bar17h05af221e174051e9E.llvm.123"),
            "foo::bar"
        );
    }

    #[test]
    fn rust_v0() {
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(
            demangle_as("_RNvCs1234_7mycrate3foo", Lang::Rust),
            "mycrate::foo"
        );
    }

    #[test]
    fn cpp_with_parameters() {
        assert_eq!(demangle("_ZN2ns6Widget4frobEi"), "ns::Widget::frob(int)");
        assert_eq!(demangle("_Z3addii"), "add(int, int)");
        assert_eq!(
            demangle_as("_ZN2ns6Widget4frobEi", Lang::Cpp),
            "ns::Widget::frob(int)"
        );
    }

    #[test]
    fn plain_names_unchanged() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("__libc_start_main"), "__libc_start_main");
        // Not valid in any scheme: left alone.
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
        assert_eq!(
            demangle("_ZN3fooé17hxxxxxxxxxxxxxxééE"),
            "_ZN3fooé17hxxxxxxxxxxxxxxééE"
        );
        assert_eq!(demangle_as("frob", Lang::Cpp), "frob");
    }
}
