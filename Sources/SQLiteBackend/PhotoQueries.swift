import GRDB
import Lifecycle

/// The v1 reference schema already has the photo columns normalisation needs
/// (`normalization_state`, `normalization_reason`, `recipe_version`): no migration yet.
enum PhotoSchema {
    static func register(in migrator: inout Migrator) {}
}
