import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Create or revoke a user's API tokens.", subcommands: [UserTokenAddCommand.self, UserTokenRevokeCommand.self])
}
