import Foundation
import JobRunner

public enum ExportJobs {
    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] { [] }
}
