#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libarchive converts entry names through the process locale (`nl_langinfo(nl_item(CODESET))`).
/// A Swift process stays in the "C" locale unless something calls `setlocale`, and in
/// that state libarchive 3.6 crashes inside `archive_write_header` on a non-ASCII tar
/// name. LC_CTYPE is switched to UTF-8 once, and only when the host left it at C/POSIX:
/// a locale the host chose on purpose is not the library's to change.
///
/// `setlocale` itself is not thread-safe; a lazily initialised global runs it exactly
/// once, before the first archive is opened.
let processLocaleIsUTF8: Bool = {
    if let current = setlocale(LC_CTYPE, nil) {
        let name = String(cString: current)
        if name == "C" || name == "POSIX" {
            _ = setlocale(LC_CTYPE, "C.UTF-8")
        }
    }
    guard let codeset = nl_langinfo(nl_item(CODESET)) else { return false }
    return String(cString: codeset) == "UTF-8"
}()
