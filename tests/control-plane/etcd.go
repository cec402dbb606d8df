package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs one etcd member on loopback until SIGTERM or SIGINT. A restart with the same
// --dir keeps the data, as a real etcd restart does.
func runEtcd(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory")
	clientPort := fs.Int("client-port", 0, "client port on 127.0.0.1")
	peerPort := fs.Int("peer-port", 0, "peer port on 127.0.0.1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *clientPort == 0 || *peerPort == 0 {
		return fmt.Errorf("--dir, --client-port and --peer-port are required")
	}
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *clientPort))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *peerPort))
	cfg := embed.NewConfig()
	cfg.Name = "default"
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = "default=" + peer.String()
	cfg.LogLevel = "warn"
	// The data lives in a throwaway directory: fsync would only slow a test machine shared by
	// several builds. Killing the process still keeps every write (the page cache survives it).
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd in %s: %w", *dir, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("etcd not ready after 60 s")
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}
