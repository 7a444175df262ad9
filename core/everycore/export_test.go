package everycore

// QueryKinds are the kinds of query a core answers, for the black-box
// tests.
var QueryKinds = map[string]byte{
	"info": queryInfo, "rooms": queryRooms, "connections": queryConnections,
	"signals": querySignals, "members": queryMembers, "disconnect": queryDisconnect,
}
