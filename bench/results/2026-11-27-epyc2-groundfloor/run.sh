#!/bin/bash
cd /tmp/ab
for round in 1 2 3; do
  for v in old new; do
    ./nibble_$v bench --layout pmx-q1,pmx-q0,onnx-b1,onnx-b0,int8,gptq,gptq-act,awq,ct,ct-act,bnb-nf4,q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,tq2_0,iq4_nl,iq4_xs,mxfp4 --group-sizes 128 --threads 1,2 --dtype f32,f16,bf16 --no-in-cache --reps 7 --format csv --out /tmp/ab/${v}_$round > /dev/null 2> /tmp/ab/${v}_$round.err
    echo "$v $round done $(date +%T)" >> /tmp/ab/progress.txt
  done
done
