// KEDA's CustomResourceDefinitions (config/crd/bases of github.com/kedacore/keda/v2, pinned here):
// the tests install them into the real control plane, so a ScaledObject the portal renders is
// checked against KEDA's own schema by a server-side dry run (tools/keda/build.sh).
module inference-portal/tools/keda

go 1.26.0

require github.com/kedacore/keda/v2 v2.21.0
