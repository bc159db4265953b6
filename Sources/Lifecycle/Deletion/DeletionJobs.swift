import Foundation
import JobRunner

public enum DeletionJobs {
    public static func kinds<Store: LifecycleStore>(for services: LifecycleServices<Store>) -> [JobKind<Store.Transaction>] { [] }
}
