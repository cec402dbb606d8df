package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// component is one child process of `up`: this same binary run with a subcommand, so each
// part keeps its own process-global state (feature gates, metrics registries, klog flags) as
// in a real cluster, and can be stopped on its own.
type component struct {
	name   string
	self   string
	args   []string
	logs   string
	exited chan<- *component

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	stopping bool
}

func (c *component) logPath() string { return filepath.Join(c.logs, c.name+".log") }

func (c *component) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.self, c.args...)
	cmd.Stdout = log
	cmd.Stderr = log
	// The child dies with this supervisor, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.stopping = cmd, done, false
	go func() {
		_ = cmd.Wait()
		log.Close()
		c.mu.Lock()
		expected := c.stopping
		c.cmd = nil
		c.mu.Unlock()
		close(done)
		if !expected {
			c.exited <- c
		}
	}()
	return nil
}

// stop sends SIGTERM and, after a grace period, SIGKILL; it returns once the process is gone.
func (c *component) stop() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	if cmd == nil {
		c.mu.Unlock()
		return
	}
	c.stopping = true
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
