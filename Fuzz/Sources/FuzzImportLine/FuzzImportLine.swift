import CLibFuzzer
import Foundation
import Lifecycle

/// main() of this executable, as SwiftPM links it (see CLibFuzzer).
@_cdecl("FuzzImportLine_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        guard let data else { return 0 }
        return fuzz(data, size)
    }
}

private let now = Date(timeIntervalSince1970: 1_760_000_000)

/// One line of an import file, as `accounts import` parses it. A refusal is the expected
/// outcome for almost every input; a crash, a sanitizer report or an accepted line that
/// breaks one of the import's promises is a bug.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // The line reader refuses what is not UTF-8 before the parser sees it.
    guard let line = String(validating: UnsafeBufferPointer(start: data, count: size), as: UTF8.self) else { return 0 }
    let message: String
    do {
        let parsed = try ImportedAccount.parse(line: line, now: now)
        check(parsed)
        // A function of the line: the same bytes give the same account.
        guard (try? ImportedAccount.parse(line: line, now: now)) == parsed else { fatalError("parsing the same line twice differed") }
        return 0
    } catch {
        message = error.description
    }
    // A refusal is printed and logged: it never carries a raw control character.
    if message.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
        fatalError("a refusal carries a control character: \(message.debugDescription)")
    }
    return 0
}

private func check(_ parsed: ImportedAccount) {
    let account = parsed.account
    func singleLine(_ value: String?, _ field: String) {
        if let value, value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            fatalError("\(field) was accepted with a control character: \(value.debugDescription)")
        }
    }
    for (field, value) in [
        ("id", account.id), ("email", account.email), ("first_name", account.firstName), ("last_name", account.lastName),
        ("display_name", account.displayName), ("primary_sport", account.primarySport), ("timezone", account.timezone),
    ] { singleLine(value, field) }
    guard BlobKey.isSafeSegment(account.id) else { fatalError("id \(account.id.debugDescription) was accepted") }
    guard let email = account.email, (try? ProfileRules.email(email)) == email, !email.contains(",") else {
        fatalError("email \(String(describing: account.email).debugDescription) was accepted")
    }
    for text in [account.bio].compactMap({ $0 }) + parsed.entries.map(\.text) {
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && !["\t", "\n", "\r"].contains($0) }) {
            fatalError("free text was accepted with a control character: \(text.debugDescription)")
        }
    }
    var keys = Set<String>()
    for photo in parsed.photos {
        let components = photo.file.split(separator: "/", omittingEmptySubsequences: false)
        guard !photo.file.hasPrefix("/"), !components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            fatalError("photo path \(photo.file.debugDescription) was accepted")
        }
        let key = BlobKey.photo(accountID: account.id, photoID: photo.id)
        guard BlobKey.isValid(key), keys.insert(key).inserted else { fatalError("photo \(photo.id.debugDescription) got key \(key)") }
    }
}
