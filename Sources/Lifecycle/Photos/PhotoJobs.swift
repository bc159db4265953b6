import Foundation
import JobRunner

public enum PhotoJobs {
    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] { [] }
}
