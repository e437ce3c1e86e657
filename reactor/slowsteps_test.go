package reactor

import "testing"

// A step's end removes only its own entry from the steps under way: the
// move that ends it may hand the job to the next state's worker here,
// whose step is listed before the first one's end. That next step's wait
// went missing from the host node (TestSlowStepSaysWhatItWaitsOn failed
// in CI when the scheduler ran the handed-on step first).
func TestAStepsEndLeavesTheNextStepOfItsJobListed(t *testing.T) {
	r := &Reactor{}
	processing, storing := NewStep(nil, nil), NewStep(nil, nil)
	processingEnded := r.stepBegan("0000000001", processing)
	storingEnded := r.stepBegan("0000000001", storing) // handed on: begun before the first's end
	processingEnded()
	v, ok := r.steps.Load("0000000001")
	if !ok || v.(*running).step != storing {
		t.Fatalf("after the Processing step's end, the job's listed step is %v (listed %v); want the Storing step", v, ok)
	}
	storingEnded()
	if _, ok := r.steps.Load("0000000001"); ok {
		t.Fatal("the job's step is still listed after its end")
	}
}
