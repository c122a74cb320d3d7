/**
 * Answers Cairn's open waits: every review and approval is approved, a
 * question answered with `--answer`. A stand-in for a person, or the
 * skeleton of a bot that decides by its own rules.
 *
 *   node dist/answer-waits.js                  # answer what is open now, then exit
 *   node dist/answer-waits.js --run RUN_ID     # answer the run's waits until it is done
 *   node dist/answer-waits.js --reject "shorter, please"   # reject reviews instead
 *
 * CAIRN_URL and CAIRN_TOKEN name the server and the token.
 */
import { parseArgs } from "node:util";
import { Client, type AnswerRequest, type Wait } from "@cairn/client";

const { values } = parseArgs({
  options: {
    run: { type: "string" },
    reject: { type: "string" },
    answer: { type: "string", default: "yes" },
  },
});
const cairn = new Client({ url: process.env.CAIRN_URL ?? "http://127.0.0.1:7700", token: process.env.CAIRN_TOKEN });

/** The answer this script gives a wait. */
function decide(wait: Wait): AnswerRequest {
  if (wait.kind === "question") return { decision: "answer", value: values.answer };
  if (wait.kind === "review" && values.reject) return { decision: "reject", feedback: values.reject };
  return { decision: "approve", reason: "answered by answer-waits" };
}

/** Answers the open waits (of `run`, if given); returns how many. */
async function answerOpen(run?: string): Promise<number> {
  const waits = await cairn.waits.list({ run, status: "open" });
  for (const wait of waits) {
    const answer = decide(wait);
    const answered = await cairn.waits.answer(wait.id, answer);
    console.log(`${wait.kind} ${wait.id} of run ${wait.run_id}: ${answer.decision} (run ${answered.run.status})`);
  }
  return waits.length;
}

/** Answers the run's waits as they open, until it is done; its final status. */
async function followRun(run: string): Promise<string> {
  for (;;) {
    const stopped = await cairn.wait(run, { until: "stopped" });
    if (stopped.status !== "waiting") return stopped.status;
    await answerOpen(run);
  }
}

if (values.run) {
  const status = await followRun(values.run);
  console.log(`run ${values.run} ${status}`);
  process.exitCode = status === "succeeded" ? 0 : 1;
} else {
  console.log(`answered ${await answerOpen()} wait(s)`);
}
