package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

const nodeName = "loopback-node"

// The stand-in for the scheduler and the kubelet (there is neither here): one Ready Node;
// every pending pod is bound to it, every bound pod reported Running and Ready with its own
// address in 127.1.0.0/16 (a test serves the pod's exporter there), and every deleted pod
// removed at once, as a kubelet does for containers that exit on SIGTERM. Without that last
// step a StatefulSet never scales in: it waits for each pod to be gone.
type nodeStandIn struct {
	client kubernetes.Interface
	pods   cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu     sync.Mutex
	ips    map[types.UID]string
	nextIP uint32
}

func runNodeStandIn(ctx context.Context, client kubernetes.Interface) {
	for {
		if err := registerNode(ctx, client); err == nil {
			break
		} else if ctx.Err() != nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	s := &nodeStandIn{
		client: client,
		pods:   podInformer.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		ips: map[types.UID]string{},
	}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			s.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	factory.Start(ctx.Done())
	defer s.queue.ShutDown()
	for range 4 {
		go s.work(ctx)
	}
	<-ctx.Done()
}

func registerNode(ctx context.Context, client kubernetes.Interface) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   nodeName,
		Labels: map[string]string{"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux"},
	}}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		if created, err = client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "the control-plane stand-in kubelet", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
	}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (s *nodeStandIn) work(ctx context.Context) {
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.sync(ctx, key); err != nil {
			fmt.Fprintf(os.Stderr, "control-plane: node stand-in: %s: %v\n", key, err)
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

func (s *nodeStandIn) sync(ctx context.Context, key types.NamespacedName) error {
	obj, exists, err := s.pods.GetByKey(key.String())
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	pods := s.client.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if pod.Spec.NodeName == "" {
			return nil
		}
		zero := int64(0)
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		s.release(pod.UID)
		return ignoreNotFound(err)
	case pod.Spec.NodeName == "":
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
		}
		return ignoreNotFound(pods.Bind(ctx, binding, metav1.CreateOptions{}))
	case pod.Spec.NodeName == nodeName && !podRunningReady(pod):
		return ignoreNotFound(s.markRunning(ctx, pod))
	}
	return nil
}

func podRunningReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (s *nodeStandIn) markRunning(ctx context.Context, pod *corev1.Pod) error {
	ip := s.ipFor(pod.UID)
	now := metav1.Now()
	status := pod.DeepCopy()
	conditions := []corev1.PodConditionType{
		corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady,
	}
	status.Status.Conditions = nil
	for _, t := range conditions {
		status.Status.Conditions = append(status.Status.Conditions,
			corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	status.Status.Phase = corev1.PodRunning
	status.Status.HostIP = "127.0.0.1"
	status.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	status.Status.PodIP = ip
	status.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	status.Status.StartTime = &now
	status.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		status.Status.ContainerStatuses = append(status.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "loopback://" + c.Image, Ready: true,
			Started: ptr(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, status, metav1.UpdateOptions{})
	return err
}

func ptr[T any](v T) *T { return &v }

// ipFor gives each pod its own address in 127.1.0.0/16, never reused while this process
// runs, so a test's exporter for one pod never answers for its successor.
func (s *nodeStandIn) ipFor(uid types.UID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ip, ok := s.ips[uid]; ok {
		return ip
	}
	s.nextIP++
	n := s.nextIP
	ip := net.IPv4(127, 1, byte(n/254), byte(n%254+1)).String()
	s.ips[uid] = ip
	return ip
}

func (s *nodeStandIn) release(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ips, uid)
}
