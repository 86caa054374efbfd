"""GitOps mode (issue 45): where a cluster or namespace is run from Git, every change made in the
portal becomes a pull request, and the portal follows it to the cluster. docs/gitops.md."""
