// Package auth is etcd's v3 authentication for Strata's server: users,
// roles, permissions on keys and ranges, the root rules, the auth
// revision, and simple or JWT tokens, by etcd 3.7's own code
// (go.etcd.io/etcd/server/v3/auth) over Strata's storage.
//
//	st, err := auth.Open(auth.Config{Token: "simple"}, storage) // storage: the mvcc store's aux keys
//	// the API side, before proposing:
//	_ = st.HashPassword(&req.Password, &req.HashedPassword) // UserAdd: no password in the log
//	_ = st.SetUser(ctx, raftRequest)                         // the token's user, checked at apply
//	// the apply side, in log order on every member:
//	resp, cmdErr, err := st.Apply(index, raftRequest) // auth commands (auth.IsCommand)
//	cmdErr = st.CheckCommand(raftRequest, leaseKeys)  // puts, deletes, txns, lease revokes
//	// reads served without the log:
//	err = st.Serve(ctx, func(ai *auth.Info) error { return st.CheckRange(ai, key, end) }, read)
//
// # State
//
// The enabled flag, the auth revision, users and roles are kept in etcd's
// encodings (authpb) under the aux keys auth/enabled, auth/revision,
// auth/user/NAME and auth/role/NAME of the mvcc store (see Storage). etcd's
// auth store reads and writes them through an in-memory backend (the
// state is small); the writes of one command are staged and committed by
// Apply with the command's log index, atomically, so a restart replays
// the log after exactly the last command kept, and a raft snapshot
// carries them (Reload after a restore).
//
// # Costs
//
// bcrypt runs where etcd runs it: HashPassword before a user add or a
// password change is proposed, and Authenticate once per token. The
// checks of each request are etcd's: a lookup of the user and of its
// merged permission intervals (etcd's range permission cache), and none at
// all while auth is disabled.
package auth
