//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// asServiceAccount makes a ServiceAccount bound to a Role with exactly rules (and, when clusterRules is not nil, a
// ClusterRole with those), and returns a kubeconfig that authenticates with its token, as jobsched in its CronJob does.
func (e *env) asServiceAccount(name string, rules, clusterRules []rbacv1.PolicyRule) string {
	e.t.Helper()
	kcfg, _ := e.serviceAccount(name, rules, clusterRules, 0)
	return kcfg
}

// serviceAccount is asServiceAccount with a token valid for ttl (0: the API server's default, an hour), and returns
// the token too.
func (e *env) serviceAccount(name string, rules, clusterRules []rbacv1.PolicyRule, ttl time.Duration) (kcfg, token string) {
	e.t.Helper()
	ctx := e.ctx
	must := func(_ any, err error) {
		e.t.Helper()
		if err != nil {
			e.t.Fatal(err)
		}
	}
	must(e.kube.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.ns}}
	must(e.kube.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}))
	must(e.kube.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subject}, metav1.CreateOptions{}))
	if clusterRules != nil {
		crName := e.ns + "-" + name
		must(e.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: clusterRules}, metav1.CreateOptions{}))
		must(e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crName},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: crName}, Subjects: subject}, metav1.CreateOptions{}))
		e.t.Cleanup(func() {
			_ = e.kube.RbacV1().ClusterRoleBindings().Delete(ctx, crName, metav1.DeleteOptions{})
			_ = e.kube.RbacV1().ClusterRoles().Delete(ctx, crName, metav1.DeleteOptions{})
		})
	}
	req := &authenticationv1.TokenRequest{}
	if ttl > 0 {
		req.Spec.ExpirationSeconds = ptr.To(int64(ttl.Seconds()))
	}
	tok, err := e.kube.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(e.kcfg)
	if err != nil {
		e.t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: e.ns}
	cfg.CurrentContext = name
	path := filepath.Join(e.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		e.t.Fatal(err)
	}
	_ = os.Chmod(path, 0o600)
	return path, tok.Status.Token
}
