package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/core/api"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
	"google.golang.org/protobuf/proto"
)

// roomService is the internal API a node serves: the core's RoomService
// (package core/api),
// and the node's own methods, Config and Reload, which belong to the
// node's config file rather than to the core (every call passed the
// node's API key check first).
type roomService struct {
	*api.Service
	n *Node
}

// Config describes the config file in force on this node.
func (s roomService) Config(ctx context.Context, _ *corralv1.ConfigRequest) (*corralv1.ConfigResponse, error) {
	res := &corralv1.ConfigResponse{Reloadable: s.n.opts.Reload != nil && s.n.opts.Core.Classes != nil}
	loaded, last := s.n.reload.lastResult()
	if !loaded.IsZero() {
		res.LoadedMs = loaded.UnixMilli()
	}
	res.LastReload = last
	if l := s.n.opts.Core.Classes; l != nil {
		t := l.Table()
		res.Version, res.Hash = t.Version, t.Hash
		for _, c := range append(t.Classes(), t.Default()) {
			res.Classes = append(res.Classes, describeClass(c))
		}
	}
	return res, nil
}

// Reload re-reads the config file, as POST /admin/reload does. A refused
// file is a result (reloaded false, the errors), not a failed call; a
// node without a config file answers failed_precondition.
func (s roomService) Reload(ctx context.Context, req *corralv1.ReloadRequest) (*corralv1.ReloadResponse, error) {
	res, err := s.n.reloadResult()
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err.Error()).WithCause(err)
	}
	if !req.GetEveryCore() {
		return res, nil
	}
	res = proto.CloneOf(res)
	answers, asked := s.Service.AskNodes(ctx, []byte{core.NodeQueryKind, nodeReload})
	for _, b := range answers {
		other := &corralv1.ReloadResponse{}
		if proto.Unmarshal(b, other) == nil {
			res.Others = append(res.Others, other)
		}
	}
	if asked > len(res.Others) {
		res.CoresMissing = uint32(asked - len(res.Others))
	}
	return res, nil
}

// nodeReload is the question another core's node asks this one (after
// core.NodeQueryKind): reload your config file.
const nodeReload = 'R'

// answerNode answers another core's node (core.Config.NodeQuery): a
// reload, whose outcome it returns; nil for anything else, or when this
// node has no config file.
func (n *Node) answerNode(_ context.Context, q []byte) []byte {
	if len(q) != 2 || q[1] != nodeReload {
		return nil
	}
	res, err := n.reloadResult()
	if err != nil {
		return nil
	}
	b, _ := proto.Marshal(res)
	return b
}

// reloadResult reloads the config file and returns the outcome it
// recorded; ErrNoConfig without a file.
func (n *Node) reloadResult() (*corralv1.ReloadResponse, error) {
	if _, err := n.Reload(); errors.Is(err, ErrNoConfig) {
		return nil, err
	}
	_, last := n.reload.lastResult()
	return last, nil
}

// describeClass lists a class's settings as "key: value" lines, named
// as in the config file (the yaml tags), nested keys joined by dots.
func describeClass(c *roomclass.Class) *corralv1.RoomClassInfo {
	info := &corralv1.RoomClassInfo{Name: c.Name, Rooms: append([]string(nil), c.Match...)}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if key == "" || key == "-" || key == "name" || key == "match" || !t.Field(i).IsExported() {
				continue
			}
			f := v.Field(i)
			if f.Kind() == reflect.Struct {
				walk(prefix+key+".", f)
				continue
			}
			val := fmt.Sprint(f.Interface())
			if d, ok := f.Interface().(time.Duration); ok {
				val = d.String()
			}
			info.Settings = append(info.Settings, prefix+key+": "+val)
		}
	}
	walk("", reflect.ValueOf(*c))
	return info
}
